//! `POST /agent/v1/error-reports` of a real service on 127.0.0.1: reports are stored
//! for the agent key's private location, only the newest of each location are kept, and
//! bad bodies are 4xx with the reference error body (nothing stored).

mod service_support;

use chrono::Utc;
use reqwest::StatusCode;
use serde_json::{Value, json};
use service_support::{TestService, error_body};

use outpost::protocol::{
    ErrorReport, ErrorReportsRequest, ErrorReportsResponse, MAX_ERROR_REPORT_BODY_BYTES,
    MAX_ERROR_REPORTS_PER_REQUEST, paths,
};
use outpost::service::store::{
    ErrorReportFilter, ErrorReportRecord, MAX_ERROR_REPORTS_PER_LOCATION,
};

fn report(message: &str) -> ErrorReport {
    let now = Utc::now();
    ErrorReport {
        event: "agent.spool.corrupt_file".into(),
        message: message.into(),
        backtrace: None,
        first_seen_at: now - chrono::Duration::seconds(5),
        last_seen_at: now,
        count: 3,
    }
}

fn request(reports: Vec<ErrorReport>) -> ErrorReportsRequest {
    ErrorReportsRequest {
        agent_version: "9.9.9".into(),
        platform: "linux-x86_64".into(),
        runtime: "rustc 1.95.0; tokio 1.54.1".into(),
        reports,
    }
}

async fn send(svc: &TestService, key: &str, body: &ErrorReportsRequest) -> ErrorReportsResponse {
    let resp = svc
        .http
        .post(format!("{}{}", svc.base, paths::ERROR_REPORTS))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.json().await.unwrap()
}

async fn stored(svc: &TestService, location: Option<uuid::Uuid>) -> Vec<ErrorReportRecord> {
    svc.handle
        .store()
        .list_error_reports(ErrorReportFilter {
            account_id: None,
            location_id: location,
            limit: 100_000,
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn reports_are_stored_for_the_keys_location_newest_kept() {
    let svc = TestService::start().await;
    let (other_location, other_key) = svc.add_location("second").await;
    let local = svc.tenant.location.id;

    let mut first = report("first");
    first.event = "agent.panic".into();
    first.backtrace = Some("0: outpost::agent::run\n1: main".into());
    let answer = send(&svc, &svc.tenant.agent_key, &request(vec![first.clone()])).await;
    assert_eq!(answer.stored, 1);
    send(&svc, &other_key, &request(vec![report("elsewhere")])).await;

    let rows = stored(&svc, Some(local)).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row.location_id, local);
    assert_eq!(row.account_id, svc.tenant.account.id);
    assert_eq!(row.location_slug, "local");
    assert_eq!(row.event, "agent.panic");
    assert_eq!(row.message, "first");
    assert_eq!(row.backtrace, first.backtrace);
    assert_eq!(row.count, 3);
    assert_eq!(row.agent_version, "9.9.9");
    assert_eq!(row.platform, "linux-x86_64");
    assert_eq!(row.runtime, "rustc 1.95.0; tokio 1.54.1");
    assert_eq!(
        row.first_seen_at.timestamp_millis(),
        first.first_seen_at.timestamp_millis()
    );
    assert_eq!(
        row.last_seen_at.timestamp_millis(),
        first.last_seen_at.timestamp_millis()
    );

    // Past the retention bound the oldest reports of the location go, newest first.
    let total = MAX_ERROR_REPORTS_PER_LOCATION as usize + 2 * MAX_ERROR_REPORTS_PER_REQUEST;
    let mut n = 0;
    while n < total {
        let batch: Vec<ErrorReport> = (n..total.min(n + MAX_ERROR_REPORTS_PER_REQUEST))
            .map(|i| report(&format!("m{i}")))
            .collect();
        n += batch.len();
        send(&svc, &svc.tenant.agent_key, &request(batch)).await;
    }
    let rows = stored(&svc, Some(local)).await;
    assert_eq!(rows.len(), MAX_ERROR_REPORTS_PER_LOCATION as usize);
    assert_eq!(rows[0].message, format!("m{}", total - 1), "newest first");
    let oldest_kept = total - MAX_ERROR_REPORTS_PER_LOCATION as usize;
    assert_eq!(
        rows.last().map(|r| r.message.clone()),
        Some(format!("m{oldest_kept}"))
    );
    assert!(!rows.iter().any(|r| r.message == "first"));
    // The other location keeps its own.
    let theirs = stored(&svc, Some(other_location)).await;
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0].message, "elsewhere");
    svc.stop().await;
}

#[tokio::test]
async fn bad_bodies_are_4xx_and_store_nothing() {
    let svc = TestService::start().await;
    let url = format!("{}{}", svc.base, paths::ERROR_REPORTS);
    let key = svc.tenant.agent_key.clone();
    let post = |body: Value| svc.http.post(&url).bearer_auth(&key).json(&body).send();
    let mut fine = report("fine");
    fine.backtrace = Some("0: main".into());
    let good = serde_json::to_value(request(vec![fine])).unwrap();
    let with = |pointer: &str, value: Value| {
        let mut body = good.clone();
        *body.pointer_mut(pointer).unwrap() = value;
        body
    };

    // No key, a wrong key.
    let resp = svc.http.post(&url).json(&good).send().await.unwrap();
    error_body(resp, StatusCode::UNAUTHORIZED).await;
    let resp = svc
        .http
        .post(&url)
        .bearer_auth("not-a-key")
        .json(&good)
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::UNAUTHORIZED).await;
    // Not JSON, not declared as JSON, empty.
    let resp = svc
        .http
        .post(&url)
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    let resp = svc
        .http
        .post(&url)
        .bearer_auth(&key)
        .body(good.to_string())
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::UNSUPPORTED_MEDIA_TYPE).await;
    let resp = svc
        .http
        .post(&url)
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;

    // Wrong shapes and values, each named in the message.
    let too_many = Value::Array(vec![
        good["reports"][0].clone();
        MAX_ERROR_REPORTS_PER_REQUEST + 1
    ]);
    let cases: Vec<(Value, &str)> = vec![
        (json!({"reports": []}), "agentVersion"),
        (json!([1, 2]), "invalid type"),
        (with("/reports", json!([])), "reports"),
        (with("/reports", too_many), "reports"),
        (with("/reports", json!("many")), "reports"),
        (with("/agentVersion", json!("")), "agentVersion"),
        (with("/platform", json!("x".repeat(500))), "platform"),
        (with("/runtime", json!("a\nb")), "runtime"),
        (
            with("/reports/0/event", json!("Not An Event")),
            "reports[0].event",
        ),
        (with("/reports/0/event", json!("")), "reports[0].event"),
        (with("/reports/0/message", json!("")), "reports[0].message"),
        (
            with("/reports/0/message", json!("x".repeat(5000))),
            "reports[0].message",
        ),
        (
            with("/reports/0/message", json!("bell \u{7}")),
            "reports[0].message",
        ),
        (
            with("/reports/0/backtrace", json!("y".repeat(40_000))),
            "reports[0].backtrace",
        ),
        (with("/reports/0/count", json!(0)), "reports[0].count"),
        (with("/reports/0/count", json!(-1)), "count"),
        (with("/reports/0/count", json!(1.5)), "count"),
        (
            with("/reports/0/firstSeenAt", json!("yesterday")),
            "firstSeenAt",
        ),
        (
            with("/reports/0/firstSeenAt", json!("2999-01-01T00:00:00Z")),
            "reports[0].firstSeenAt",
        ),
    ];
    for (body, named) in cases {
        let resp = post(body.clone()).await.unwrap();
        let err = error_body(resp, StatusCode::BAD_REQUEST).await;
        let message = err["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{body}: {message}");
    }

    // Over the body limit, declared and streamed (chunked, no content-length).
    let mut big = request(vec![report("big")]);
    big.reports[0].message = "z".repeat(MAX_ERROR_REPORT_BODY_BYTES + 10);
    let big = serde_json::to_vec(&big).unwrap();
    let resp = svc
        .http
        .post(&url)
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::PAYLOAD_TOO_LARGE).await;
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        big.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
    let resp = svc
        .http
        .post(&url)
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::PAYLOAD_TOO_LARGE).await;

    assert!(stored(&svc, None).await.is_empty(), "nothing was stored");
    // The route still works after all that.
    let answer = send(&svc, &key, &request(vec![report("fine")])).await;
    assert_eq!(answer.stored, 1);
    assert_eq!(stored(&svc, None).await.len(), 1);
    svc.stop().await;
}
