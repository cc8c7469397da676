//! `GET /openapi.json` of a real `outpost serve`: served without a key, a valid OpenAPI 3
//! document (openapi-spec-validator from PyPI, in the schemathesis virtualenv), holding
//! every path and method of the reference document, and describing exactly what the
//! router serves: every documented operation reaches a route (never the "no such route"
//! 404), and on every documented path the methods the router allows (the `Allow`
//! header of a 405) are the documented ones. The other direction — no route without
//! an entry — holds by construction: routes are only added through the route table
//! that the document is built from (`service::api::routes`). The agent protocol's
//! bodies, whose schemas are generated from the handlers' types, are held to them by
//! schemathesis.

mod schemathesis_support;
mod serve_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

use reqwest::Method;
use serde_json::Value;
use serve_support::Serve;

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "head"];

fn documented_methods(item: &Value) -> BTreeSet<String> {
    METHODS
        .iter()
        .filter(|m| item.get(**m).is_some())
        .map(|m| m.to_uppercase())
        .collect()
}

/// A concrete path: every `{param}` replaced by a (well-formed, unknown) UUID.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|s| {
            if s.starts_with('{') {
                "00000000-0000-4000-8000-000000000000"
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[test]
fn the_service_documents_exactly_the_routes_it_serves() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path());
    let creds = serve.credentials();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .unwrap();

    // Served without a key.
    let (status, text) = rt.block_on(async {
        let resp = http
            .get(format!("{}/openapi.json", serve.base))
            .send()
            .await
            .unwrap();
        (resp.status(), resp.text().await.unwrap())
    });
    assert_eq!(status, 200, "{text}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.0"));

    // A valid OpenAPI 3 document.
    let python = schemathesis_support::python();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &text).unwrap();
    let out = Command::new(&python)
        .args(["-m", "openapi_spec_validator"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openapi-spec-validator refused the document:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Every path and method of the reference.
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/public-api.openapi.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let mut missing = Vec::new();
    for (path, item) in reference["paths"].as_object().unwrap() {
        let ours = paths.get(path).map(documented_methods).unwrap_or_default();
        for m in documented_methods(item) {
            if !ours.contains(&m) {
                missing.push(format!("{m} {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "reference operations missing: {missing:?}"
    );

    // Every documented operation reaches a route, and the router allows exactly the
    // documented methods on each path.
    let mut wrong = Vec::new();
    rt.block_on(async {
        for (path, item) in paths {
            let url = format!("{}{}", serve.base, concrete(path));
            let documented = documented_methods(item);
            for m in &documented {
                let method: Method = m.parse().unwrap();
                let mut req = http
                    .request(method.clone(), &url)
                    .bearer_auth(creds["apiKey"].as_str().unwrap())
                    .header("x-service-account", creds["accountId"].as_str().unwrap());
                if method == Method::POST || method == Method::PUT {
                    req = req.header("content-type", "application/json").body("{}");
                }
                let resp = req.send().await.unwrap();
                let status = resp.status().as_u16();
                let body = resp.text().await.unwrap_or_default();
                let no_route = status == 404 && body.contains("no such route");
                // HEAD of the ping address is documented as refused (405).
                let refused = status == 405 && method != Method::HEAD;
                if no_route || refused {
                    wrong.push(format!("{m} {path}: {status} {body}"));
                }
            }
            let resp = http.request(Method::OPTIONS, &url).send().await.unwrap();
            let allow: BTreeSet<String> = resp
                .headers()
                .get("allow")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect();
            let mut expected = documented.clone();
            if expected.contains("GET") {
                // axum answers HEAD wherever it answers GET.
                expected.insert("HEAD".to_owned());
            }
            if resp.status() != 405 || allow != expected {
                wrong.push(format!(
                    "{path}: OPTIONS got {} allowing {allow:?}, documented {expected:?}",
                    resp.status()
                ));
            }
        }
    });
    assert!(
        wrong.is_empty(),
        "document and router disagree:\n{}",
        wrong.join("\n")
    );
    drop(serve);
}

/// The served document, written to `dir/openapi.json`.
fn served_document(serve: &Serve, dir: &Path) -> (Value, std::path::PathBuf) {
    let text = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let http = reqwest::Client::builder().no_proxy().build().unwrap();
            let resp = http
                .get(format!("{}/openapi.json", serve.base))
                .send()
                .await
                .unwrap();
            resp.text().await.unwrap()
        });
    let file = dir.join("openapi.json");
    std::fs::write(&file, &text).unwrap();
    (serde_json::from_str(&text).unwrap(), file)
}

/// Runs schemathesis with the served document on the operations `include` matches,
/// asserts it found nothing, and returns the report to look into.
fn schemathesis_on_own_operations(
    serve: &Serve,
    dir: &Path,
    headers: &[String],
    include: &str,
) -> std::path::PathBuf {
    let python = schemathesis_support::python();
    let (_, document) = served_document(serve, dir);
    let report = dir.join("own.ndjson");
    let mut args: Vec<String> = headers
        .iter()
        .flat_map(|h| ["--header".to_owned(), h.clone()])
        .collect();
    args.extend(
        [
            "--include-path-regex",
            include,
            "--seed",
            "20261124",
            "--max-examples",
            "30",
        ]
        .map(str::to_owned),
    );
    let out = schemathesis_support::run(&python, &document, &serve.base, &args, &report);
    schemathesis_support::assert_clean(&report, &out, "own-operations-report.ndjson");
    report
}

/// The agent protocol's operations, whose schemas the document generates from the
/// handlers' Rust types: schemathesis (real requests to a real `outpost serve` with a
/// real agent key) finds no 5xx, no answer off its schema, and no request that breaks
/// the schema accepted. LEASE is left out: it long-polls up to 25 s per request.
#[test]
fn the_agent_protocol_keeps_to_the_generated_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path());
    let creds = serve.credentials();
    let agent_key = creds["agentKey"].as_str().unwrap();
    let report = schemathesis_on_own_operations(
        &serve,
        dir.path(),
        &[format!("Authorization: Bearer {agent_key}")],
        "^/agent/v1/(hello|leases/renew|leases/release|results|error-reports)$",
    );
    // Every included operation was exercised both ways.
    for route in [
        "POST /agent/v1/hello",
        "POST /agent/v1/leases/renew",
        "POST /agent/v1/leases/release",
        "POST /agent/v1/results",
        "POST /agent/v1/error-reports",
    ] {
        let answers = schemathesis_support::status_codes(&report, route);
        // Generated data the schema admits is accepted, data it refuses is refused.
        assert!(
            answers.contains(&200),
            "{route} never accepted: {answers:?}"
        );
        assert!(answers.contains(&400), "{route} never refused: {answers:?}");
    }
    drop(serve);
}

/// Outpost's own JSON routes of the public API (status page keys, the account the
/// vendor CLI reads, project deploys and deletions): schemathesis finds nothing with
/// the served document, and real answers of each (created keys, listings, the
/// account, dry runs) conform to the schemas the document generates for them.
#[test]
fn outposts_own_public_routes_keep_to_the_generated_schemas() {
    use outpost::service::reference_schema::validate_in;
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path());
    let creds = serve.credentials();
    let (key, account) = (
        creds["apiKey"].as_str().unwrap().to_owned(),
        creds["accountId"].as_str().unwrap().to_owned(),
    );
    let report = schemathesis_on_own_operations(
        &serve,
        dir.path(),
        &[
            format!("Authorization: Bearer {key}"),
            format!("x-service-account: {account}"),
        ],
        "^/(v1/status-pages/\\{[a-z_]+\\}/keys.*|next/accounts/.*|v1/projects/.*)$",
    );
    for route in [
        "GET /v1/status-pages/{id}/keys",
        "POST /v1/status-pages/{id}/keys",
        "DELETE /v1/status-pages/{id}/keys/{key_id}",
        "GET /next/accounts/{account_id}",
        "POST /v1/projects/deploy",
        "DELETE /v1/projects/{logical_id}",
    ] {
        let answers = schemathesis_support::status_codes(&report, route);
        assert!(!answers.is_empty(), "{route} was not exercised");
    }

    // Real answers on their success paths, checked against the served document.
    let (doc, _) = served_document(&serve, dir.path());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let call = |method: Method, path: &str, body: Option<Value>| {
        let mut req = http
            .request(method, format!("{}{path}", serve.base))
            .bearer_auth(&key)
            .header("x-service-account", &account);
        if let Some(body) = body {
            req = req.json(&body);
        }
        rt.block_on(async {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap();
            (
                status,
                serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
            )
        })
    };
    let conforms = |method: &str, template: &str, status: u16, body: &Value| {
        let op = &doc["paths"][template][method];
        let responses = &op["responses"];
        let answer = responses
            .get(status.to_string())
            .or_else(|| responses.get("2XX"))
            .unwrap_or(&Value::Null);
        let schema = &answer["content"]["application/json"]["schema"];
        assert!(
            schema.is_object(),
            "{method} {template} documents no {status} body"
        );
        validate_in(&doc, schema, body, "")
            .unwrap_or_else(|e| panic!("{method} {template} {status}: {e}\n{body}"));
    };
    let (status, page) = call(
        Method::POST,
        "/v1/status-pages",
        Some(serde_json::json!({"name": "Doc page", "url": "doc-page", "cards": []})),
    );
    assert_eq!(status, 201, "{page}");
    let page_id = page["id"].as_str().unwrap();
    let keys = format!("/v1/status-pages/{page_id}/keys");
    let (status, created) = call(Method::POST, &keys, None);
    assert_eq!(status, 201, "{created}");
    assert!(created["key"].is_string());
    conforms("post", "/v1/status-pages/{id}/keys", 201, &created);
    let (status, listed) = call(Method::GET, &keys, None);
    assert_eq!(status, 200);
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    conforms("get", "/v1/status-pages/{id}/keys", 200, &listed);
    let (status, _) = call(
        Method::DELETE,
        &format!("{keys}/{}", created["id"].as_str().unwrap()),
        None,
    );
    assert_eq!(status, 204);
    let (status, me) = call(Method::GET, &format!("/next/accounts/{account}"), None);
    assert_eq!(status, 200);
    conforms("get", "/next/accounts/{account_id}", 200, &me);
    let project = serde_json::json!({
        "project": {"logicalId": "doc", "name": "Doc", "repoUrl": null},
        "sharedFiles": [], "resources": [], "repoInfo": null,
    });
    let (status, dry) = call(
        Method::POST,
        "/v1/projects/deploy?dryRun=true",
        Some(project.clone()),
    );
    assert_eq!(status, 200, "{dry}");
    conforms("post", "/v1/projects/deploy", 200, &dry);
    let (status, recorded) = call(Method::POST, "/v1/projects/deploy", Some(project));
    assert_eq!(status, 200, "{recorded}");
    assert!(recorded["id"].is_string());
    conforms("post", "/v1/projects/deploy", 200, &recorded);
    let (status, gone) = call(Method::DELETE, "/v1/projects/doc", None);
    assert_eq!(status, 200, "{gone}");
    conforms("delete", "/v1/projects/{logical_id}", 200, &gone);
    // A body off the schema is caught: the check above could fail.
    let e = validate_in(
        &doc,
        &doc["paths"]["/next/accounts/{account_id}"]["get"]["responses"]["200"]["content"]["application/json"]
            ["schema"],
        &serde_json::json!({"id": 5}),
        "",
    );
    assert!(e.is_err());
    drop(serve);
}
