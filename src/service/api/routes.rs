//! The route table. Every route of the service is added through [`Routes`], which
//! registers the handler with axum and records its method and path in the same call,
//! so no route is served without an entry: `GET /openapi.json` (see `openapi`) is
//! built from these entries.

use axum::Router;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, on};

use super::route_doc::{HandlerDoc, JsonBodies};
use crate::service::context::AppState;

/// Which part of the service a route belongs to (the document's tag and security).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    /// The public API: `Authorization: Bearer <API key>` and `x-service-account`.
    Public,
    /// The public API's routes that need no key (runtimes, locations, the document).
    Open,
    /// The ping address of heartbeats: the token in the path is the secret.
    Ping,
    /// The agent API: `Authorization: Bearer <agent key>`.
    Agent,
}

/// One served (method, path).
#[derive(Debug, Clone)]
pub struct RouteEntry {
    pub method: Method,
    /// The axum path, with `{name}` parameters.
    pub path: String,
    pub area: Area,
    /// The JSON bodies of a route added with [`Routes::documented`].
    pub json: Option<JsonBodies>,
}

/// An axum router and the entries of every route it serves.
pub struct Routes {
    router: Router<AppState>,
    entries: Vec<RouteEntry>,
    area: Area,
}

impl Routes {
    /// Routes whose entries belong to `area` (until [`Routes::area`] changes it).
    pub fn new(area: Area) -> Routes {
        Routes {
            router: Router::new(),
            entries: Vec::new(),
            area,
        }
    }

    /// The area of the routes added from now on.
    pub fn area(mut self, area: Area) -> Routes {
        self.area = area;
        self
    }

    /// Serves `method path` with `handler` and records it.
    pub fn on<H, T>(mut self, method: Method, path: &str, handler: H) -> Routes
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        let filter = match method {
            Method::GET => MethodFilter::GET,
            Method::POST => MethodFilter::POST,
            Method::PUT => MethodFilter::PUT,
            Method::DELETE => MethodFilter::DELETE,
            Method::PATCH => MethodFilter::PATCH,
            Method::HEAD => MethodFilter::HEAD,
            ref other => panic!("no route is served with method {other}"),
        };
        self.router = self.router.route(path, on(filter, handler));
        self.entries.push(RouteEntry {
            method,
            path: path.to_owned(),
            area: self.area,
            json: None,
        });
        self
    }

    /// Serves `method path` with `handler` and records the JSON bodies its signature
    /// names (`route_doc::HandlerDoc`): the document describes the types the handler
    /// really takes and answers.
    pub fn documented<H, T, Args>(self, method: Method, path: &str, handler: H) -> Routes
    where
        H: Handler<T, AppState> + HandlerDoc<Args>,
        T: 'static,
    {
        let mut routes = self.on(method, path, handler);
        if let Some(entry) = routes.entries.last_mut() {
            entry.json = Some(H::bodies());
        }
        routes
    }

    pub fn get<H: Handler<T, AppState>, T: 'static>(self, path: &str, handler: H) -> Routes {
        self.on(Method::GET, path, handler)
    }

    pub fn post<H: Handler<T, AppState>, T: 'static>(self, path: &str, handler: H) -> Routes {
        self.on(Method::POST, path, handler)
    }

    pub fn put<H: Handler<T, AppState>, T: 'static>(self, path: &str, handler: H) -> Routes {
        self.on(Method::PUT, path, handler)
    }

    pub fn delete<H: Handler<T, AppState>, T: 'static>(self, path: &str, handler: H) -> Routes {
        self.on(Method::DELETE, path, handler)
    }

    /// Adds `other`'s routes and entries.
    pub fn merge(mut self, other: Routes) -> Routes {
        self.router = self.router.merge(other.router);
        self.entries.extend(other.entries);
        self
    }

    /// Wraps the routes added so far (layers such as body limits).
    pub fn map(mut self, f: impl FnOnce(Router<AppState>) -> Router<AppState>) -> Routes {
        self.router = f(self.router);
        self
    }

    /// The entries recorded so far.
    pub fn entries(&self) -> &[RouteEntry] {
        &self.entries
    }

    pub fn into_parts(self) -> (Router<AppState>, Vec<RouteEntry>) {
        (self.router, self.entries)
    }
}
