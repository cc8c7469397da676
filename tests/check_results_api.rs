//! `/v1/check-results`: the reference query parameters of the listing (time window,
//! location, check type, failures, result type) and their 400s, one result in the
//! reference `CheckResult` shape, and the asset manifest and downloads of the files an
//! agent uploaded for a result, isolated between accounts.

mod service_support;

use std::collections::BTreeMap;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use service_support::{TestService, error_body, result_for};

use outpost::model::{ArtifactRef, HttpRequestSummary, HttpResponseSummary, RunStatus};
use outpost::protocol::{LeasedJob, SubmitStatus};

const PCAP: &[u8] = b"\xd4\xc3\xb2\xa1fake pcap bytes";
const TRACEROUTE: &[u8] = br#"{"hops":[]}"#;

async fn get(svc: &TestService, path: &str) -> reqwest::Response {
    svc.api(Method::GET, path).send().await.unwrap()
}

async fn get_json(svc: &TestService, path: &str) -> Value {
    let resp = get(svc, path).await;
    assert_eq!(resp.status(), StatusCode::OK, "GET {path}");
    resp.json().await.unwrap()
}

/// Uploads an artifact of a leased job as the agent does.
async fn upload(svc: &TestService, job: &LeasedJob, name: &str, bytes: &'static [u8]) {
    let resp = svc
        .http
        .put(format!(
            "{}/agent/v1/jobs/{}/artifacts/{name}?leaseId={}",
            svc.base, job.job_id, job.lease_id
        ))
        .bearer_auth(&svc.tenant.agent_key)
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
}

/// Runs one session of `check_id` through a hand-driven agent: a FAILED result with a
/// request, a response and two uploaded artifacts, or a PASSED one without. Returns
/// the result id.
async fn run_once(svc: &TestService, check_id: &str, failed: bool) -> String {
    let session = svc.trigger_ids(&[check_id]).await.remove(0);
    let agent = svc.agent();
    let job = agent.lease(1, 0).await.remove(0);
    let mut submitted = result_for(
        &job,
        if failed {
            RunStatus::Failed
        } else {
            RunStatus::Passed
        },
    );
    if failed {
        upload(svc, &job, "capture.pcap", PCAP).await;
        upload(svc, &job, "traceroute.json", TRACEROUTE).await;
        let r = &mut submitted.result;
        r.request = Some(HttpRequestSummary {
            method: "GET".into(),
            url: "http://127.0.0.1:9/".into(),
            headers: BTreeMap::from([("accept".to_owned(), "*/*".to_owned())]),
            body: None,
        });
        r.response = Some(HttpResponseSummary {
            status: 503,
            status_text: "Service Unavailable".into(),
            url: "http://127.0.0.1:9/".into(),
            redirects: vec![],
            headers: BTreeMap::new(),
            body: Some("down".into()),
            body_size: 4,
            body_truncated: false,
        });
        r.artifacts = vec![
            ArtifactRef {
                name: "capture.pcap".into(),
                content_type: "application/vnd.tcpdump.pcap".into(),
                size: PCAP.len() as u64,
            },
            ArtifactRef {
                name: "traceroute.json".into(),
                content_type: "application/json".into(),
                size: TRACEROUTE.len() as u64,
            },
        ];
    }
    let out = agent.submit(vec![submitted]).await;
    assert_eq!(out.outcomes[0].status, SubmitStatus::Accepted);
    let session = svc
        .get_session(session["checkSessionId"].as_str().unwrap())
        .await;
    session["results"][0]["checkResultId"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The fields the reference `CheckResult` schema requires or types.
fn assert_check_result_shape(r: &Value) {
    assert!(r["id"].is_string() && r["checkId"].is_string() && r["name"].is_string());
    assert!(r["hasFailures"].is_boolean() && r["hasErrors"].is_boolean());
    assert!(r["isCancelled"].is_boolean());
    assert!(r["runLocation"].is_string());
    assert!(r["created_at"].is_string());
    assert!(r["responseTime"].is_number(), "{r}");
    assert!(r["attempts"].is_number());
    assert!(["FINAL", "ATTEMPT"].contains(&r["resultType"].as_str().unwrap()));
    assert!(r.get("traceId").is_some_and(Value::is_null));
    assert!(r["sequenceId"].is_null());
    assert!(r["errorGroupIds"].is_array());
}

#[tokio::test]
async fn one_result_has_the_reference_shape() {
    let svc = TestService::start().await;
    let check = svc.create_check(json!({"name": "site"})).await;
    let check_id = check["id"].as_str().unwrap().to_owned();
    let result_id = run_once(&svc, &check_id, true).await;

    let r = get_json(&svc, &format!("/v1/check-results/{check_id}/{result_id}")).await;
    assert_check_result_shape(&r);
    assert_eq!(r["id"], result_id.as_str());
    assert_eq!(r["name"], "site");
    assert_eq!(r["hasFailures"], true);
    assert_eq!(r["resultType"], "FINAL");
    assert_eq!(r["runLocation"], "local");
    let api = &r["apiCheckResult"];
    assert_eq!(api["request"]["method"], "GET");
    assert_eq!(api["request"]["url"], "http://127.0.0.1:9/");
    assert_eq!(api["request"]["headers"]["accept"], "*/*");
    assert_eq!(api["response"]["status"], 503);
    assert_eq!(api["response"]["statusText"], "Service Unavailable");
    assert_eq!(api["response"]["body"], "down");
    assert_eq!(api["assertions"], json!([]));
    let pcap_url = api["pcapDataUrl"].as_str().unwrap();
    assert_eq!(
        pcap_url,
        format!(
            "{}/v1/check-results/{check_id}/{result_id}/assets/capture.pcap",
            svc.base
        )
    );
    assert_eq!(api["jobAssets"].as_array().unwrap().len(), 2);

    // The list shows the same document.
    let listed = get_json(&svc, &format!("/v1/check-results/{check_id}")).await;
    assert_eq!(listed, json!([r]));

    // Unknown and malformed ids.
    let resp = get(
        &svc,
        &format!("/v1/check-results/{check_id}/{}", uuid::Uuid::new_v4()),
    )
    .await;
    error_body(resp, StatusCode::NOT_FOUND).await;
    let resp = get(&svc, &format!("/v1/check-results/{check_id}/not-a-uuid")).await;
    error_body(resp, StatusCode::BAD_REQUEST).await;
    svc.stop().await;
}

#[tokio::test]
async fn listing_filters_by_the_reference_parameters() {
    let svc = TestService::start().await;
    let check = svc.create_check(json!({})).await;
    let id = check["id"].as_str().unwrap().to_owned();
    let failed = run_once(&svc, &id, true).await;
    let passed = run_once(&svc, &id, false).await;
    let ids = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let list = |q: &str| {
        let path = format!("/v1/check-results/{id}?{q}");
        let svc = &svc;
        async move { get_json(svc, &path).await }
    };

    // Newest first; limit and page.
    assert_eq!(ids(&list("").await), vec![passed.clone(), failed.clone()]);
    assert_eq!(ids(&list("limit=1").await), vec![passed.clone()]);
    assert_eq!(ids(&list("limit=1&page=2").await), vec![failed.clone()]);
    assert_eq!(ids(&list("limit=1&page=3").await), Vec::<String>::new());
    // hasFailures, location, checkType, resultType.
    assert_eq!(ids(&list("hasFailures=true").await), vec![failed.clone()]);
    assert_eq!(ids(&list("hasFailures=false").await), vec![passed.clone()]);
    assert_eq!(ids(&list("location=local").await).len(), 2);
    assert_eq!(ids(&list("location=elsewhere").await).len(), 0);
    assert_eq!(ids(&list("checkType=URL").await).len(), 2);
    assert_eq!(ids(&list("checkType=API").await).len(), 0);
    assert_eq!(ids(&list("checkType=SSL").await).len(), 0);
    assert_eq!(ids(&list("resultType=FINAL").await).len(), 2);
    assert_eq!(ids(&list("resultType=ALL").await).len(), 2);
    assert_eq!(ids(&list("resultType=ATTEMPT").await).len(), 0);
    // The time window, in UNIX seconds.
    let now = chrono::Utc::now().timestamp();
    assert_eq!(ids(&list(&format!("from={}", now - 60)).await).len(), 2);
    assert_eq!(ids(&list(&format!("from={}", now + 60)).await).len(), 0);
    assert_eq!(ids(&list(&format!("to={}", now - 60)).await).len(), 0);
    let window = format!("from={}&to={}", now - 3600, now + 3600);
    assert_eq!(ids(&list(&window).await).len(), 2);

    for (q, field) in [
        ("limit=0", "limit"),
        ("limit=500", "limit"),
        ("page=0", "page"),
        ("page=x", "page"),
        ("from=yesterday", "from"),
        ("to=-5", "to"),
        (&format!("from={now}&to={}", now - 1), "to"),
        (&format!("from={}&to={now}", now - 6 * 3600 - 1), "to"),
        ("checkType=BOGUS", "checkType"),
        ("hasFailures=maybe", "hasFailures"),
        ("resultType=LAST", "resultType"),
    ] {
        let resp = get(&svc, &format!("/v1/check-results/{id}?{q}")).await;
        let body = error_body(resp, StatusCode::BAD_REQUEST).await;
        let message = body["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{field}:")), "{q}: {message}");
    }
    let resp = get(&svc, &format!("/v1/check-results/{}", uuid::Uuid::new_v4())).await;
    error_body(resp, StatusCode::NOT_FOUND).await;
    svc.stop().await;
}

#[tokio::test]
async fn assets_are_listed_served_and_isolated() {
    let svc = TestService::start().await;
    let check = svc.create_check(json!({"name": "shop"})).await;
    let check_id = check["id"].as_str().unwrap().to_owned();
    let result_id = run_once(&svc, &check_id, true).await;
    let clean_id = run_once(&svc, &check_id, false).await;
    let base = format!("/v1/check-results/{check_id}/{result_id}/assets");

    let manifest = get_json(&svc, &base).await;
    assert_eq!(manifest["truncated"], false);
    let assets = manifest["assets"].as_array().unwrap();
    assert_eq!(assets.len(), 2, "{manifest}");
    let pcap = &assets[0];
    assert_eq!(pcap["type"], "pcap");
    assert_eq!(pcap["name"], "capture.pcap");
    assert_eq!(pcap["contentType"], "application/vnd.tcpdump.pcap");
    assert_eq!(pcap["url"], format!("{}{base}/capture.pcap", svc.base));
    assert_eq!(pcap["source"]["type"], "check-result");
    assert_eq!(pcap["source"]["checkId"], check_id.as_str());
    assert_eq!(pcap["source"]["checkName"], "shop");
    assert_eq!(pcap["source"]["checkType"], "URL");
    assert_eq!(pcap["source"]["resultId"], result_id.as_str());
    assert_eq!(assets[1]["name"], "traceroute.json");
    assert_eq!(assets[1]["type"], "report");
    assert_eq!(assets[1]["contentType"], "application/json");

    // Filters: type (repeatable) and a case-insensitive name glob.
    let names = |v: Value| -> Vec<String> {
        v["assets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names(get_json(&svc, &format!("{base}?type=pcap")).await),
        vec!["capture.pcap"]
    );
    assert_eq!(
        names(get_json(&svc, &format!("{base}?type=pcap&type=report")).await).len(),
        2
    );
    assert_eq!(
        names(get_json(&svc, &format!("{base}?type=video")).await).len(),
        0
    );
    assert_eq!(
        names(get_json(&svc, &format!("{base}?name=TRACE*")).await),
        vec!["traceroute.json"]
    );
    assert_eq!(
        names(get_json(&svc, &format!("{base}?name=")).await).len(),
        2
    );
    let resp = get(&svc, &format!("{base}?type=movie")).await;
    error_body(resp, StatusCode::BAD_REQUEST).await;
    let resp = get(&svc, &format!("{base}?name={}", "x".repeat(201))).await;
    error_body(resp, StatusCode::BAD_REQUEST).await;

    // A result without files has an empty manifest.
    let clean = get_json(
        &svc,
        &format!("/v1/check-results/{check_id}/{clean_id}/assets"),
    )
    .await;
    assert_eq!(clean, json!({"assets": [], "truncated": false}));

    // Downloads: the stored bytes with the result's media type.
    let resp = get(&svc, &format!("{base}/capture.pcap")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers()["content-type"],
        "application/vnd.tcpdump.pcap"
    );
    assert_eq!(resp.bytes().await.unwrap().as_ref(), PCAP);
    let resp = get(&svc, &format!("{base}/traceroute.json")).await;
    assert_eq!(resp.bytes().await.unwrap().as_ref(), TRACEROUTE);
    let resp = get(&svc, &format!("{base}/other.bin")).await;
    error_body(resp, StatusCode::NOT_FOUND).await;
    let resp = get(
        &svc,
        &format!("/v1/check-results/{check_id}/{clean_id}/assets/capture.pcap"),
    )
    .await;
    error_body(resp, StatusCode::NOT_FOUND).await;

    // Another account learns nothing: the manifest, the file and the result are 404s.
    let other = svc.other_tenant("theirs").await;
    for path in [
        base.clone(),
        format!("{base}/capture.pcap"),
        format!("/v1/check-results/{check_id}/{result_id}"),
        format!("/v1/check-results/{check_id}"),
    ] {
        let resp = svc.api_as(&other, Method::GET, &path).send().await.unwrap();
        error_body(resp, StatusCode::NOT_FOUND).await;
    }
    // And without a key, a 401.
    let resp = svc
        .http
        .get(format!("{}{base}", svc.base))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::UNAUTHORIZED).await;
    svc.stop().await;
}
