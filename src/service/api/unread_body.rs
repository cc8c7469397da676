//! `Connection: close` on every answer given before the request's body was read to its
//! end (a 401 before the body, a 413 past the body limit, a route with no use for a
//! body). The server then closes the connection instead of leaving unread bytes in it,
//! and the header tells the client so: without it a keep-alive client sends its next
//! request on a connection the server is closing, and that request gets no answer.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, BodyDataStream, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::Stream;

/// A request body that records when it has been read to its end.
struct Tracked {
    inner: BodyDataStream,
    done: Arc<AtomicBool>,
}

impl Stream for Tracked {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = Pin::new(&mut self.inner).poll_next(cx);
        if let Poll::Ready(None) = polled {
            self.done.store(true, Ordering::Release);
        }
        polled
    }
}

/// The middleware: see the module documentation.
pub async fn close_if_unread(req: Request, next: Next) -> Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let done = Arc::new(AtomicBool::new(false));
    let (parts, body) = req.into_parts();
    let tracked = Body::from_stream(Tracked {
        inner: body.into_data_stream(),
        done: done.clone(),
    });
    let mut response = next.run(Request::from_parts(parts, tracked)).await;
    if !done.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
