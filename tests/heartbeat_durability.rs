//! A ping answered 200 is durable: a real `outpost serve` is killed with SIGKILL right
//! after the answer of its last ping, restarted on the same data directory, and every
//! answered ping is there.

mod serve_support;

use serve_support::Serve;
use std::path::Path;

use serde_json::{Value, json};

fn credentials(dir: &Path) -> (String, String) {
    let text = std::fs::read_to_string(dir.join("credentials.json")).unwrap();
    let c: Value = serde_json::from_str(&text).unwrap();
    (
        c["apiKey"].as_str().unwrap().to_owned(),
        c["accountId"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn answered_pings_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let serve = Serve::start(dir.path());
    let (key, account) = credentials(dir.path());
    let api = |method: reqwest::Method, base: &str, path: &str| {
        http.request(method, format!("{base}{path}"))
            .bearer_auth(&key)
            .header("x-service-account", &account)
    };
    let resp = api(reqwest::Method::POST, &serve.base, "/v1/checks/heartbeat")
        .json(
            &json!({"name": "durable", "heartbeat": {"period": 1, "periodUnit": "hours",
            "grace": 0, "graceUnit": "minutes"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::CREATED);
    let created: Value = resp.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let ping_url = created["heartbeat"]["pingUrl"].as_str().unwrap().to_owned();
    assert!(ping_url.starts_with(&format!("{}/ping/", serve.base)));

    // Sequential and concurrent pings; the last answer is followed at once by SIGKILL.
    const SEQUENTIAL: i64 = 20;
    const CONCURRENT: i64 = 30;
    for _ in 0..SEQUENTIAL {
        let resp = http.post(&ping_url).send().await.unwrap();
        assert_eq!(resp.status(), reqwest::StatusCode::OK);
    }
    let answers = futures_util::future::join_all(
        (0..CONCURRENT).map(|_| http.get(&ping_url).header("user-agent", "cron/1").send()),
    )
    .await;
    for a in answers {
        assert_eq!(a.unwrap().status(), reqwest::StatusCode::OK);
    }
    let last = http.post(&ping_url).body("last").send().await.unwrap();
    assert_eq!(last.status(), reqwest::StatusCode::OK);
    serve.kill9();

    let serve = Serve::start(dir.path());
    let resp = api(
        reqwest::Method::GET,
        &serve.base,
        &format!("/v1/checks/heartbeats/{id}/events"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body[0]["stats"]["last24Hours"]["totalEntitiesCurrentPeriod"],
        SEQUENTIAL + CONCURRENT + 1,
        "{body}"
    );
    // The address is the same after the restart (the token is stored).
    let again = api(
        reqwest::Method::GET,
        &serve.base,
        &format!("/v1/checks/{id}"),
    )
    .send()
    .await
    .unwrap()
    .json::<Value>()
    .await
    .unwrap();
    let token = |u: &str| u.rsplit('/').next().unwrap().to_owned();
    assert_eq!(
        token(again["heartbeat"]["pingUrl"].as_str().unwrap()),
        token(&ping_url)
    );
    let resp = http
        .post(again["heartbeat"]["pingUrl"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    drop(serve);
}
