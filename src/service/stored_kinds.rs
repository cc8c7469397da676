//! The fields of the stored-only check types (see `check_kinds`): what each type needs
//! beyond the common fields, checked against the reference schemas, so that a stored
//! document of such a type is what its executor will need and what the reference's read
//! schema describes.
//!
//! - Request types (traceroute, SSL, gRPC): `request` conforms to the type's request
//!   schema, with its defaults filled in; traceroute and gRPC requests name their target
//!   (`request.url`).
//! - Playwright suites: `codeBundlePath` is required (where the agent finds the suite).
//! - Agentic checks: `intent` with its `goal` is required (what the agent verifies).
//! - Every stored-only type: the whole document, with the read schema's defaults
//!   filled in, conforms to the read schema (`GET /v1/checks/{id}` answers it).

use serde_json::{Map, Value};

use super::check_kinds::{CheckKind, KindBody};
use super::errors::ApiError;
use super::reference_schema::{self, SchemaViolation};
use crate::model::CheckType;

fn refused(v: SchemaViolation) -> ApiError {
    ApiError::invalid(&v.path, v.message)
}

fn schema(name: &str) -> Result<&'static Value, ApiError> {
    reference_schema::component(name)
        .ok_or_else(|| ApiError::internal(&format!("reference schema {name} missing")))
}

/// Checks and fills the type's own fields of `doc` (after the common fields).
pub fn type_fields(kind: &CheckKind, doc: &mut Map<String, Value>) -> Result<(), ApiError> {
    if let Some(name) = kind.request_schema {
        let request_schema = schema(name)?;
        let Some(request) = doc.get_mut("request") else {
            return Err(ApiError::invalid("request", "is required"));
        };
        reference_schema::validate(request_schema, request, "request").map_err(refused)?;
        reference_schema::fill_defaults(request_schema, request);
        if matches!(kind.check_type, CheckType::Traceroute | CheckType::Grpc) {
            match request.get("url") {
                Some(Value::String(url)) if !url.trim().is_empty() => {}
                _ => {
                    return Err(ApiError::invalid(
                        "request.url",
                        "is required: the host (or URL) to reach",
                    ));
                }
            }
        }
    }
    match kind.body {
        KindBody::PlaywrightSuite => match doc.get("codeBundlePath") {
            Some(Value::String(path)) if !path.trim().is_empty() => Ok(()),
            Some(Value::String(_)) => Err(ApiError::invalid("codeBundlePath", "must not be empty")),
            None | Some(Value::Null) => Err(ApiError::invalid(
                "codeBundlePath",
                "is required: the path of the suite's code bundle",
            )),
            Some(_) => Err(ApiError::invalid("codeBundlePath", "must be a string")),
        },
        KindBody::Agentic => match doc.get("intent") {
            Some(Value::Object(_)) => Ok(()),
            _ => Err(ApiError::invalid(
                "intent",
                "is required: an agentic check needs intent.goal, the outcome its agent verifies",
            )),
        },
        KindBody::Request | KindBody::Script => Ok(()),
    }
}

/// Fills the read schema's defaults into the document and checks it against the schema.
pub fn conform(kind: &CheckKind, document: &mut Value) -> Result<(), ApiError> {
    let read_schema = schema(kind.read_schema)?;
    reference_schema::fill_defaults(read_schema, document);
    reference_schema::validate(read_schema, document, "").map_err(refused)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use serde_json::{Value, json};

    use crate::model::CheckType;
    use crate::service::check_doc::normalize_check;
    use crate::service::errors::ApiError;

    fn normalize(t: CheckType, extra: Value) -> Result<Value, ApiError> {
        let mut body = json!({"name": "n", "privateLocations": ["local"]});
        if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
            b.extend(e);
        }
        let slugs: HashSet<String> = ["local".to_owned()].into_iter().collect();
        normalize_check(t, body, None, &slugs).map(|c| c.document)
    }

    fn refused_field(t: CheckType, extra: Value) -> String {
        match normalize(t, extra.clone()) {
            Ok(doc) => panic!("{t} {extra} was accepted: {doc}"),
            Err(e) => e.message.split(':').next().unwrap_or("").to_owned(),
        }
    }

    #[test]
    fn request_types_get_their_reference_defaults_and_limits() {
        let ssl = normalize(
            CheckType::Ssl,
            json!({"request": {"sslConfig": {"hostname": "shop.test"}}}),
        )
        .unwrap();
        assert_eq!(ssl["checkType"], "SSL");
        assert_eq!(ssl["request"]["sslConfig"]["port"], 443);
        assert_eq!(ssl["request"]["sslConfig"]["alertDaysBeforeExpiry"], 20);
        assert_eq!(ssl["request"]["assertions"], json!([]));
        assert_eq!(ssl["maxResponseTime"], Value::Null);

        let trace = normalize(
            CheckType::Traceroute,
            json!({"request": {"url": "db.internal", "maxHops": 20, "protocol": "TCP", "port": 5432,
                "assertions": [{"source": "HOP_COUNT", "comparison": "LESS_THAN", "target": "10"}]}}),
        )
        .unwrap();
        assert_eq!(trace["request"]["maxHops"], 20);
        assert_eq!(trace["request"]["assertions"][0]["property"], "");
        let grpc = normalize(
            CheckType::Grpc,
            json!({"frequency": 0, "frequencyOffset": 30, "request": {"url": "grpc.internal", "port": 50051,
                "grpcConfig": {"mode": "HEALTH"}}}),
        )
        .unwrap();
        assert_eq!(grpc["frequency"], 0);

        for (t, extra, field) in [
            (CheckType::Ssl, json!({}), "request"),
            (CheckType::Ssl, json!({"request": {}}), "request.sslConfig"),
            (
                CheckType::Ssl,
                json!({"request": {"sslConfig": {"hostname": "h", "handshakeTimeoutMs": 10}}}),
                "request.sslConfig.handshakeTimeoutMs",
            ),
            (CheckType::Traceroute, json!({"request": {}}), "request.url"),
            (
                CheckType::Traceroute,
                json!({"request": {"url": "h", "maxHops": 65}}),
                "request.maxHops",
            ),
            (
                CheckType::Traceroute,
                json!({"request": {"url": "h", "assertions": [{"source": "BODY"}]}}),
                "request.assertions[0].source",
            ),
            (
                CheckType::Grpc,
                json!({"request": {"url": " "}}),
                "request.url",
            ),
            (
                CheckType::Grpc,
                json!({"request": {"url": "h", "grpcConfig": {"mode": "FAST"}}}),
                "request.grpcConfig.mode",
            ),
        ] {
            assert_eq!(refused_field(t, extra.clone()), field, "{t} {extra}");
        }
    }

    #[test]
    fn playwright_suites_and_agentic_checks_need_their_own_fields() {
        let suite = normalize(
            CheckType::Playwright,
            json!({"codeBundlePath": "bundles/shop.tar.gz", "engine": "bun"}),
        )
        .unwrap();
        assert_eq!(suite["testCommand"], "npx playwright test");
        assert_eq!(suite["browsers"], json!(["chromium"]));
        assert_eq!(suite["engine"], "bun");
        assert_eq!(suite.get("request"), None);
        let agentic = normalize(
            CheckType::Agentic,
            json!({"intent": {"goal": "a visitor can check out"}}),
        )
        .unwrap();
        assert_eq!(agentic["intent"]["goal"], "a visitor can check out");

        for (t, extra, field) in [
            (CheckType::Playwright, json!({}), "codeBundlePath"),
            (
                CheckType::Playwright,
                json!({"codeBundlePath": ""}),
                "codeBundlePath",
            ),
            (
                CheckType::Playwright,
                json!({"codeBundlePath": "b", "engine": "deno"}),
                "engine",
            ),
            (
                CheckType::Playwright,
                json!({"codeBundlePath": "b", "browsers": "chromium"}),
                "browsers",
            ),
            (
                CheckType::Playwright,
                json!({"codeBundlePath": "b", "frequency": 0, "frequencyOffset": 10}),
                "frequency",
            ),
            (CheckType::Agentic, json!({}), "intent"),
            (
                CheckType::Agentic,
                json!({"intent": {"goal": ""}}),
                "intent.goal",
            ),
        ] {
            assert_eq!(refused_field(t, extra.clone()), field, "{t} {extra}");
        }
    }
}
