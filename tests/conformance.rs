//! Conformance of the public API with the reference document, proven by schemathesis
//! against one real `outpost serve` (the account and API key of its bootstrap
//! `credentials.json`, sent as `Authorization: Bearer` and `x-service-account`).
//!
//! The document is the service's own `GET /openapi.json`: for every operation of the
//! reference, the reference's (`tests/conformance/public-api.openapi.json`, a
//! byte-identical copy of the shared reference) with the departures listed in
//! `tests/conformance/adjustments.json`, each with its written reason (extra documented
//! error codes, Outpost's extensions, the spec's word over the reference's). Outpost's
//! own operations (tagged `Outpost`, `Heartbeat ping`, `Agent protocol`) are left to
//! `tests/openapi_document.rs`. Testing the served document proves that what the
//! server says of itself is what it does. Before fuzzing, fixtures of
//! every resource are created (checks of each type, a heartbeat, an alert channel, a
//! status page with a card, services, an incident with an update, a session), so that
//! lists answer with real entries and schemathesis reuses their ids.
//!
//! A real `outpost agent` serves the bootstrap location during the run, so the check
//! sessions schemathesis triggers finish and the completion routes
//! (`/v1|v2/check-sessions/{id}/completion`) answer 200 with a final session instead of
//! waiting out `maxWaitSeconds`. Generated checks may name any host, and the test must
//! stay on loopback: the agent reaches the service only through a proxy that hands it
//! the fixture checks' documents as the test wrote them (all on 127.0.0.1) and the URL
//! fixture for every other job, whatever the stored check says
//! (`tests/loopback_agent_support`).
//!
//! Checks: `not_a_server_error`, `response_schema_conformance`,
//! `status_code_conformance` and `negative_data_rejection`, over the examples and
//! fuzzing phases (positive and negative data), with a fixed seed and
//! `CONFORMANCE_EXAMPLES` cases per operation (default 20). A failure lists every
//! distinct schemathesis failure: operation, check, message, request and response.

mod loopback_agent_support;
mod schemathesis_support;
mod serve_support;

use std::collections::HashMap;
use std::path::Path;

use loopback_agent_support::LoopbackAgent;
use reqwest::Method;
use serde_json::{Value, json};
use serve_support::Serve;

const SEED: &str = "20261123";

struct Api {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    base: String,
    key: String,
    account: String,
}

impl Api {
    /// A request that must succeed; returns its JSON body.
    fn ok(&self, method: Method, path: &str, body: Value) -> Value {
        self.rt.block_on(async {
            let mut req = self
                .http
                .request(method.clone(), format!("{}{path}", self.base))
                .bearer_auth(&self.key)
                .header("x-service-account", &self.account);
            if !body.is_null() {
                req = req.json(&body);
            }
            let resp = req.send().await.unwrap();
            let status = resp.status();
            let text = resp.text().await.unwrap();
            assert!(status.is_success(), "{method} {path}: {status} {text}");
            serde_json::from_str(&text).unwrap_or(Value::Null)
        })
    }
}

/// What the fixtures made that the agent needs.
struct Fixtures {
    /// The checks agents run (URL, API, TCP) by id, as created: all on 127.0.0.1.
    agent_checks: HashMap<String, Value>,
    /// The URL check as created (what any other job runs instead).
    url_check: Value,
    /// The session the fixtures triggered.
    session: String,
}

/// One object of every resource, so that lists and reads have real data to show.
fn fixtures(api: &Api, location: &str) -> Fixtures {
    let loc = json!([location]);
    let url = api.ok(
        Method::POST,
        "/v1/checks/url",
        json!({"name": "fixture url", "request": {"url": "http://127.0.0.1:9/"}, "privateLocations": loc, "tags": ["t"]}),
    );
    let api_check = api.ok(
        Method::POST,
        "/v1/checks/api",
        json!({"name": "fixture api", "request": {"url": "http://127.0.0.1:9/", "method": "GET"}, "privateLocations": loc}),
    );
    let tcp_check = api.ok(
        Method::POST,
        "/v1/checks/tcp",
        json!({"name": "fixture tcp", "request": {"hostname": "127.0.0.1", "port": 9}, "privateLocations": loc}),
    );
    api.ok(
        Method::POST,
        "/v1/checks/heartbeat",
        json!({"name": "fixture hb", "heartbeat": {"period": 1, "periodUnit": "hours", "grace": 1, "graceUnit": "hours"}}),
    );
    api.ok(
        Method::POST,
        "/v1/alert-channels",
        json!({"type": "EMAIL", "config": {"address": "ops@example.com"}}),
    );
    let service = api.ok(
        Method::POST,
        "/v1/status-pages/services",
        json!({"name": "Fixture service"}),
    );
    api.ok(
        Method::POST,
        "/v1/status-pages",
        json!({"name": "Fixture page", "url": "fixture-page", "cards": [{"name": "Core", "services": [{"id": service["id"]}]}]}),
    );
    let incident = api.ok(
        Method::POST,
        "/v1/status-pages/incidents",
        json!({
            "name": "Fixture incident",
            "severity": "MINOR",
            "services": [{"id": service["id"], "name": service["name"], "accountId": api.account}],
            "incidentUpdates": [{"description": "Looking into it", "status": "INVESTIGATING"}],
        }),
    );
    api.ok(
        Method::POST,
        &format!(
            "/v1/status-pages/incidents/{}/incident-updates",
            incident["id"].as_str().unwrap()
        ),
        json!({"description": "Found it", "status": "IDENTIFIED"}),
    );
    let triggered = api.ok(
        Method::POST,
        "/v2/check-sessions/trigger",
        json!({"target": {"checkId": [url["id"]]}}),
    );
    let by_id = |v: Value| (v["id"].as_str().unwrap().to_owned(), v);
    Fixtures {
        agent_checks: [by_id(url.clone()), by_id(api_check), by_id(tcp_check)].into(),
        session: triggered["sessions"][0]["checkSessionId"]
            .as_str()
            .unwrap()
            .to_owned(),
        url_check: url,
    }
}

/// Waits for a session's completion: the agent has run it.
fn await_completion(api: &Api, session: &str) -> Value {
    api.rt.block_on(async {
        for _ in 0..4 {
            let resp = api
                .http
                .get(format!(
                    "{}/v2/check-sessions/{session}/completion?maxWaitSeconds=30",
                    api.base
                ))
                .bearer_auth(&api.key)
                .header("x-service-account", &api.account)
                .send()
                .await
                .unwrap();
            match resp.status().as_u16() {
                200 => return resp.json().await.unwrap(),
                408 => continue,
                other => panic!("completion of {session}: {other} {:?}", resp.text().await),
            }
        }
        panic!("the fixture session {session} did not complete: is the agent running?")
    })
}

#[test]
fn the_public_api_conforms_to_the_reference_document() {
    let python = schemathesis_support::python();
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path());
    let creds = serve.credentials();
    let api = Api {
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        http: reqwest::Client::builder().no_proxy().build().unwrap(),
        base: serve.base.clone(),
        key: creds["apiKey"].as_str().unwrap().to_owned(),
        account: creds["accountId"].as_str().unwrap().to_owned(),
    };
    let fixtures = fixtures(&api, creds["privateLocation"].as_str().unwrap());
    let mut agent = LoopbackAgent::start(
        &serve.base,
        creds["agentKey"].as_str().unwrap(),
        fixtures.agent_checks.clone(),
        fixtures.url_check.clone(),
        dir.path(),
    );
    // The agent runs the fixture session (127.0.0.1:9 refuses: FAILED).
    let done = await_completion(&api, &fixtures.session);
    assert_eq!(done["status"], "FAILED", "{done}\n{}", agent.output());
    // The reference documents no 401 for these: they need no key.
    for path in ["/v1/locations", "/v1/runtimes", "/v1/runtimes/2026.04"] {
        let status = api.rt.block_on(async {
            let resp = api.http.get(format!("{}{path}", api.base)).send().await;
            resp.unwrap().status()
        });
        assert_eq!(status, 200, "GET {path} without a key");
    }

    let served = api.rt.block_on(async {
        let resp = api
            .http
            .get(format!("{}/openapi.json", api.base))
            .send()
            .await
            .unwrap();
        resp.text().await.unwrap()
    });
    let document = dir.path().join("openapi.served.json");
    std::fs::write(&document, served).unwrap();
    let reports = dir.path().join("reports");
    let examples = std::env::var("CONFORMANCE_EXAMPLES").unwrap_or_else(|_| "20".to_owned());
    let out = schemathesis_support::run(
        &python,
        &document,
        &serve.base,
        &[
            "--header".to_owned(),
            format!("Authorization: Bearer {}", api.key),
            "--header".to_owned(),
            format!("x-service-account: {}", api.account),
            "--seed".to_owned(),
            SEED.to_owned(),
            "--max-examples".to_owned(),
            examples,
            // Hypothesis' own check that too few generated cases pass schemathesis'
            // filters (path ids of some operations): a limit of the generator, not a
            // finding about the service.
            "--suppress-health-check".to_owned(),
            "filter_too_much".to_owned(),
            "--exclude-tag-regex".to_owned(),
            "^(Outpost|Heartbeat ping|Agent protocol.*)$".to_owned(),
        ],
        &reports.join("run.ndjson"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    schemathesis_support::assert_clean(
        &reports.join("run.ndjson"),
        &out,
        "conformance-report.ndjson",
    );
    // Something was tested: the summary names the operations.
    assert!(stdout.contains("Tested:"), "{stdout}");
    // Every operation of the reference, and none of Outpost's own, was tested.
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/public-api.openapi.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut expected = std::collections::BTreeSet::new();
    for (path, item) in reference["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            expected.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    let tested = schemathesis_support::tested_operations(&reports.join("run.ndjson"));
    assert_eq!(tested, expected, "operations tested vs the reference's");
    // The completion routes were tested on sessions the agent finished: mostly 200s
    // (without an agent most real sessions would answer 408 after maxWaitSeconds).
    for route in [
        "GET /v1/check-sessions/{checkSessionId}/completion",
        "GET /v2/check-sessions/{checkSessionId}/completion",
    ] {
        let answers = schemathesis_support::status_codes(&reports.join("run.ndjson"), route);
        let finished = answers.iter().filter(|c| **c == 200).count();
        let timed_out = answers.iter().filter(|c| **c == 408).count();
        assert!(
            finished > 0 && timed_out < finished,
            "{route}: {finished} completed sessions, {timed_out} time-outs: {answers:?}"
        );
    }
    assert!(agent.running(), "the agent died:\n{}", agent.output());
    drop(agent);
    drop(serve);
}
