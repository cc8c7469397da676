//! What a handler's signature says of its JSON bodies, for `GET /openapi.json`: the
//! request body is the `ApiJson<T>` among its arguments, the answer its return type
//! (`Json<T>` 200, [`Created<T>`] 201, [`NoContent`] 204, `(StatusCode, Json<T>)` some
//! 2xx). [`HandlerDoc`] is implemented for every handler whose arguments and answer
//! say so, so a route added with `Routes::documented` is described by the types its
//! handler really takes and returns: change the handler, the document follows.

use std::future::Future;

use axum::Json;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemars::{JsonSchema, Schema, SchemaGenerator};

use super::extract::ApiJson;
use crate::service::auth::{AgentAuth, ApiAuth};
use crate::service::errors::ApiError;

/// Generates the schema of one body into a generator (a `$ref` into its definitions).
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// The JSON bodies of a documented route.
#[derive(Debug, Clone, Copy)]
pub struct JsonBodies {
    /// The request body's schema, when the handler takes `ApiJson<T>`.
    pub request: Option<SchemaFn>,
    /// The success status (`"200"`, `"201"`, `"204"`, or `"2XX"` when it varies).
    pub status: &'static str,
    /// The answer's schema, when the answer has a JSON body.
    pub response: Option<SchemaFn>,
}

/// An extractor argument of a handler: whether it is the JSON request body.
pub trait ArgDoc {
    const REQUEST: Option<SchemaFn> = None;
}

impl<T: JsonSchema> ArgDoc for ApiJson<T> {
    const REQUEST: Option<SchemaFn> = Some(schema_of::<T>);
}
impl<T> ArgDoc for State<T> {}
impl<T> ArgDoc for Path<T> {}
impl ArgDoc for RawQuery {}
impl ArgDoc for Request {}
impl ArgDoc for ApiAuth {}
impl ArgDoc for AgentAuth {}

/// A handler's answer: its success status and JSON body.
pub trait AnswerDoc {
    const STATUS: &'static str;
    const BODY: Option<SchemaFn>;
}

impl<T: JsonSchema> AnswerDoc for Json<T> {
    const STATUS: &'static str = "200";
    const BODY: Option<SchemaFn> = Some(schema_of::<T>);
}

impl<T: JsonSchema> AnswerDoc for (StatusCode, Json<T>) {
    const STATUS: &'static str = "2XX";
    const BODY: Option<SchemaFn> = Some(schema_of::<T>);
}

/// `201 Created` with a JSON body.
pub struct Created<T>(pub T);

impl<T: serde::Serialize> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        (StatusCode::CREATED, Json(self.0)).into_response()
    }
}

impl<T: JsonSchema> AnswerDoc for Created<T> {
    const STATUS: &'static str = "201";
    const BODY: Option<SchemaFn> = Some(schema_of::<T>);
}

/// `204 No Content`.
pub struct NoContent;

impl IntoResponse for NoContent {
    fn into_response(self) -> Response {
        StatusCode::NO_CONTENT.into_response()
    }
}

impl AnswerDoc for NoContent {
    const STATUS: &'static str = "204";
    const BODY: Option<SchemaFn> = None;
}

/// A handler whose arguments and answer are documented (`Args` are its argument
/// types, inferred).
pub trait HandlerDoc<Args> {
    fn bodies() -> JsonBodies;
}

macro_rules! handler_doc {
    ($($arg:ident),*) => {
        impl<F, Fut, R, $($arg,)*> HandlerDoc<($($arg,)*)> for F
        where
            F: Fn($($arg),*) -> Fut,
            Fut: Future<Output = Result<R, ApiError>>,
            R: AnswerDoc,
            $($arg: ArgDoc,)*
        {
            fn bodies() -> JsonBodies {
                let request = None $(.or(<$arg as ArgDoc>::REQUEST))*;
                JsonBodies {
                    request,
                    status: R::STATUS,
                    response: R::BODY,
                }
            }
        }
    };
}

handler_doc!(A1);
handler_doc!(A1, A2);
handler_doc!(A1, A2, A3);
handler_doc!(A1, A2, A3, A4);

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::generate::SchemaSettings;

    #[derive(serde::Serialize, serde::Deserialize, JsonSchema)]
    struct Ask {
        question: String,
    }

    #[derive(serde::Serialize, JsonSchema)]
    struct Reply {
        answer: u32,
    }

    async fn ask(_: State<()>, _: ApiAuth, _: ApiJson<Ask>) -> Result<Created<Reply>, ApiError> {
        Ok(Created(Reply { answer: 42 }))
    }

    async fn forget(_: Path<String>) -> Result<NoContent, ApiError> {
        Ok(NoContent)
    }

    fn bodies_of<A, H: HandlerDoc<A>>(_: &H) -> JsonBodies {
        H::bodies()
    }

    #[test]
    fn the_signature_gives_the_bodies() {
        let mut generator = SchemaSettings::openapi3().into_generator();
        let asked = bodies_of(&ask);
        assert_eq!(asked.status, "201");
        let request = asked.request.map(|f| f(&mut generator).to_value());
        assert_eq!(
            request,
            Some(serde_json::json!({"$ref": "#/components/schemas/Ask"}))
        );
        let response = asked.response.map(|f| f(&mut generator).to_value());
        assert_eq!(
            response,
            Some(serde_json::json!({"$ref": "#/components/schemas/Reply"}))
        );
        let forgot = bodies_of(&forget);
        assert_eq!(forgot.status, "204");
        assert!(forgot.request.is_none() && forgot.response.is_none());
    }
}
