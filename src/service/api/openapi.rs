//! `GET /openapi.json`: the service's own OpenAPI 3.0 document, built from the route
//! table (`routes::RouteEntry`), so it lists exactly the routes the router serves.
//!
//! An operation the reference document (`tests/conformance/public-api.openapi.json`)
//! also has — same method, same path up to parameter names — is described by the
//! reference's operation (parameters, request body, responses and component schemas),
//! adjusted as `tests/conformance/adjustments.json` lists, each with its reason: the
//! error codes the service really answers, and patches for Outpost's extensions and
//! departures (WEBHOOK status page subscribers, private pages, bounds of names).
//! `tests/conformance.rs` runs schemathesis with this served document, so the service
//! keeps to exactly what it serves. Outpost's own JSON routes (agent protocol, status
//! page keys, project deploys) are described by schemas generated from their handlers'
//! types (`route_doc`); every other route (pages, pings, artifacts, this document) gets
//! its path parameters, a success answer and the `{statusCode, error, message}` errors.

use regex::Regex;
use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::routes::{Area, RouteEntry};
use crate::service::reference_schema;

const ADJUSTMENTS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/conformance/adjustments.json"
));

/// The path of the document.
pub const OPENAPI_PATH: &str = "/openapi.json";

/// `/a/{x}/b/{y}` -> `/a/{}/b/{}`: paths equal up to parameter names.
fn shape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push('{');
            }
            '}' => {
                in_param = false;
                out.push('}');
            }
            _ if in_param => {}
            c => out.push(c),
        }
    }
    out
}

fn path_params(path: &str) -> Vec<&str> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .collect()
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ApiError"}}},
    })
}

/// The reference with the adjustments applied: the extra error codes of `responses`
/// and the `patches` (Outpost's extensions and departures, each with its reason).
/// `excluded` concerns the conformance test only.
fn adjusted_reference() -> Value {
    let mut doc = reference_schema::reference().clone();
    let adjustments: Value = serde_json::from_str(ADJUSTMENTS).unwrap_or(Value::Null);
    let rules = adjustments["responses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(paths) = doc["paths"].as_object_mut() else {
        return doc;
    };
    for rule in rules {
        let Some(pattern) = rule["operations"].as_str().and_then(|p| Regex::new(p).ok()) else {
            continue;
        };
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (method, op) in item.iter_mut() {
                if !pattern.is_match(&format!("{} {path}", method.to_uppercase())) {
                    continue;
                }
                let Some(responses) = op["responses"].as_object_mut() else {
                    continue;
                };
                for code in rule["codes"].as_array().into_iter().flatten() {
                    if let Some(code) = code.as_u64() {
                        responses
                            .entry(code.to_string())
                            .or_insert_with(|| error_response("Error"));
                    }
                }
            }
        }
    }
    let patches = adjustments["patches"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for patch in patches {
        if let Some(pointer) = patch["pointer"].as_str() {
            apply_patch(&mut doc, pointer, patch["value"].clone());
        }
    }
    doc
}

/// Sets the value at `pointer` (RFC 6901): replaces it, or adds the last member to an
/// object that lacks it. Returns whether the pointer named a place.
fn apply_patch(doc: &mut Value, pointer: &str, value: Value) -> bool {
    if let Some(target) = doc.pointer_mut(pointer) {
        *target = value;
        return true;
    }
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return false;
    };
    let key = last.replace("~1", "/").replace("~0", "~");
    match doc.pointer_mut(parent).and_then(Value::as_object_mut) {
        Some(object) => {
            object.insert(key, value);
            true
        }
        None => false,
    }
}

/// Drops every string `default` shorter than its schema's `minLength`: the reference
/// has five (`default: ""` with `minLength: 1`), which makes it an invalid document.
fn drop_invalid_defaults(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let min = m.get("minLength").and_then(Value::as_u64).unwrap_or(0);
            if m.get("default")
                .and_then(Value::as_str)
                .is_some_and(|d| (d.chars().count() as u64) < min)
            {
                m.remove("default");
            }
            m.values_mut().for_each(drop_invalid_defaults);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_invalid_defaults),
        _ => {}
    }
}

/// Adds the schemas generated from Rust types (the agent protocol's bodies) to the
/// components. A name the reference already uses would keep the reference's schema;
/// a unit test makes sure that no generated name clashes with one.
fn add_generated(components: &mut Value, generated: Map<String, Value>) {
    let Some(schemas) = components.get_mut("schemas").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, schema) in generated {
        schemas.entry(name).or_insert(schema);
    }
}

/// An operation for a route the reference does not describe. A route added with
/// `Routes::documented` gets its request body and success answer from the schemas of
/// its handler's types (generated into `generator`'s definitions).
fn own_operation(entry: &RouteEntry, key: &str, generator: &mut SchemaGenerator) -> Value {
    let method = entry.method.as_str().to_lowercase();
    let mut parameters: Vec<Value> = path_params(key)
        .into_iter()
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    let (tag, security, ok) = match entry.area {
        Area::Public => ("Outpost", json!([{"Bearer": []}]), "Successful"),
        Area::Open => ("Outpost", json!([]), "Successful"),
        Area::Ping => (
            "Heartbeat ping",
            json!([]),
            "The ping was recorded (GET and POST count as pings)",
        ),
        Area::Agent => (
            "Agent protocol (docs/protocol.md)",
            json!([{"Bearer": []}]),
            "Successful",
        ),
    };
    if entry.area == Area::Public {
        parameters.push(
            json!({"name": "x-service-account", "in": "header", "schema": {"type": "string"}}),
        );
    }
    let operation_id = format!(
        "{method}{}",
        entry
            .path
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|s| !s.is_empty())
            .map(|s| {
                let mut c = s.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect::<String>()
    );
    let mut responses = Map::new();
    let mut request_body = None;
    if let Some(bodies) = entry.json {
        let json_content = |schema: Value| json!({"application/json": {"schema": schema}});
        if let Some(request) = bodies.request {
            request_body = Some(json!({
                "required": true,
                "content": json_content(request(generator).to_value()),
            }));
        }
        let mut answer = json!({"description": ok});
        if let Some(response) = bodies.response {
            answer["content"] = json_content(response(generator).to_value());
        }
        responses.insert(bodies.status.into(), answer);
        responses.insert(
            "4XX".into(),
            error_response("Refused input, unknown id or missing key"),
        );
    } else if entry.method == http::Method::HEAD {
        responses.insert("405".into(), error_response("HEAD is not a ping"));
    } else {
        responses.insert("2XX".into(), json!({"description": ok}));
        responses.insert(
            "4XX".into(),
            error_response("Refused input, unknown id or missing key"),
        );
    }
    let mut operation = json!({
        "operationId": operation_id,
        "summary": format!("{} {}", entry.method, entry.path),
        "tags": [tag],
        "security": security,
        "parameters": parameters,
        "responses": responses,
    });
    if let (Some(body), Some(op)) = (request_body, operation.as_object_mut()) {
        op.insert("requestBody".into(), body);
    }
    operation
}

/// The document of `entries`.
pub fn document(entries: &[RouteEntry]) -> Value {
    let reference = adjusted_reference();
    let reference_paths = reference["paths"].as_object().cloned().unwrap_or_default();
    let mut paths = Map::new();
    let mut generator = SchemaSettings::openapi3().into_generator();
    for entry in entries {
        let method = entry.method.as_str().to_lowercase();
        let shaped = shape(&entry.path);
        let known = reference_paths.iter().find(|(p, _)| shape(p) == shaped);
        let (key, mut operation) = match known {
            Some((p, item)) => match item.get(&method) {
                Some(op) => (p.clone(), op.clone()),
                None => (p.clone(), own_operation(entry, p, &mut generator)),
            },
            None => (
                entry.path.clone(),
                own_operation(entry, &entry.path, &mut generator),
            ),
        };
        if entry.area == Area::Open
            && let Some(op) = operation.as_object_mut()
        {
            op.insert("security".into(), json!([]));
        }
        let item = paths
            .entry(key)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(item) = item.as_object_mut() {
            item.insert(method, operation);
        }
    }
    let mut components = reference["components"].clone();
    drop_invalid_defaults(&mut components);
    add_generated(&mut components, generator.take_definitions(true));
    let mut paths = Value::Object(paths);
    drop_invalid_defaults(&mut paths);
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Outpost",
            "version": crate::VERSION,
            "description": "The routes this Outpost service serves, generated from its route table. Operations shared with the reference public API are described by the reference's operations and schemas, plus the error codes Outpost answers.",
        },
        "servers": [{"url": "/"}],
        "security": [{"Bearer": []}],
        "paths": paths,
        "components": components,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_ignore_parameter_names() {
        assert_eq!(shape("/v1/checks/{id}/x"), "/v1/checks/{}/x");
        assert_eq!(
            shape("/v1/check-sessions/{checkSessionId}"),
            shape("/v1/check-sessions/{id}")
        );
        assert_eq!(path_params("/a/{x}/b/{y}"), vec!["x", "y"]);
    }

    #[test]
    fn the_embedded_documents_parse() {
        let reference: Value = reference_schema::reference().clone();
        assert!(reference["paths"].as_object().is_some_and(|p| p.len() > 50));
        let adjustments: Value = serde_json::from_str(ADJUSTMENTS).unwrap();
        assert!(adjustments["responses"].is_array());
    }

    /// Every route added with `documented` (the agent protocol, Outpost's own JSON
    /// routes) has its bodies' schemas in the document, generated from the handler's
    /// types, under names the reference does not use; every `$ref` of the document
    /// resolves.
    #[test]
    fn json_routes_carry_the_schemas_of_their_handlers_types() {
        let routes = crate::service::api::route_table();
        let entries = routes.entries();
        let json_routes: Vec<&RouteEntry> = entries.iter().filter(|e| e.json.is_some()).collect();
        assert!(json_routes.len() >= 6, "{json_routes:?}");

        let mut generator = SchemaSettings::openapi3().into_generator();
        for e in &json_routes {
            let bodies = e.json.unwrap();
            for schema in [bodies.request, bodies.response].into_iter().flatten() {
                schema(&mut generator);
            }
        }
        let generated = generator.take_definitions(true);
        let reference: Value = reference_schema::reference().clone();
        let reference_names = reference["components"]["schemas"].as_object().unwrap();
        for name in generated.keys() {
            assert!(!reference_names.contains_key(name), "{name} clashes");
        }

        let doc = document(entries);
        let lease = &doc["paths"]["/agent/v1/jobs/lease"]["post"];
        assert_eq!(
            lease["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/LeaseRequest"
        );
        assert_eq!(
            lease["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/LeaseResponse"
        );
        let schemas = &doc["components"]["schemas"];
        let job = &schemas["LeasedJob"]["properties"];
        for field in [
            "jobId",
            "leaseId",
            "leaseExpiresAt",
            "pool",
            "checkId",
            "check",
        ] {
            assert!(job.get(field).is_some(), "LeasedJob.{field}: {job}");
        }
        // Variants with doc comments come out as `oneOf` single-value enums.
        let pools: Vec<&Value> = schemas["Pool"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|v| v["enum"].as_array().unwrap())
            .collect();
        assert_eq!(pools, [&json!("uptime"), &json!("heavy")]);
        let result = &schemas["RunResult"];
        assert!(
            result["required"]
                .as_array()
                .unwrap()
                .contains(&json!("checkType"))
        );

        fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(r)) = m.get("$ref") {
                        out.push(r);
                    }
                    m.values().for_each(|v| refs(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        refs(&doc, &mut all);
        for r in all {
            let name = r.strip_prefix("#/components/schemas/").unwrap_or(r);
            assert!(schemas.get(name).is_some(), "dangling $ref {r}");
        }
    }

    /// Every adjustment has its reason and takes effect: each `responses` rule matches an
    /// operation, each patch names a place in the reference (or a property to add to an
    /// object of it).
    #[test]
    fn every_adjustment_has_a_reason_and_applies() {
        let adjustments: Value = serde_json::from_str(ADJUSTMENTS).unwrap();
        let reference: Value = reference_schema::reference().clone();
        for rule in adjustments["responses"].as_array().unwrap() {
            assert!(
                rule["reason"].as_str().is_some_and(|r| r.len() > 20),
                "{rule}"
            );
            let pattern = Regex::new(rule["operations"].as_str().unwrap()).unwrap();
            let matched = reference["paths"]
                .as_object()
                .unwrap()
                .iter()
                .any(|(p, item)| {
                    item.as_object()
                        .unwrap()
                        .keys()
                        .any(|m| pattern.is_match(&format!("{} {p}", m.to_uppercase())))
                });
            assert!(matched, "{rule} matches no operation");
        }
        let mut doc = reference.clone();
        for patch in adjustments["patches"].as_array().unwrap() {
            assert!(
                patch["reason"].as_str().is_some_and(|r| r.len() > 20),
                "{patch}"
            );
            let pointer = patch["pointer"].as_str().unwrap();
            assert!(
                apply_patch(&mut doc, pointer, patch["value"].clone()),
                "{pointer} names nothing"
            );
            assert_eq!(doc.pointer(pointer), Some(&patch["value"]));
        }
        let served = document(&[]);
        assert_eq!(
            served["components"]["schemas"]["StatusPageV2PublicApiUpdate"]["properties"]["isPrivate"]
                ["type"],
            "boolean"
        );
        assert!(!apply_patch(&mut doc, "/no/such/place", json!(1)));
    }

    #[test]
    fn webhook_subscribers_are_documented_as_an_extension() {
        let doc = document(&[]);
        for name in ["Model77", "Model79"] {
            let schema = &doc["components"]["schemas"][name];
            assert_eq!(schema["enum"], json!(["EMAIL", "WEBHOOK"]), "{name}");
            assert!(
                schema["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("Outpost extension: WEBHOOK")),
                "{name}: {schema}"
            );
        }
    }
}
