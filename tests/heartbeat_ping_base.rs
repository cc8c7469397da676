//! `outpost serve --ping-url` (`OUTPOST_PING_URL`): the public base of heartbeat ping
//! addresses when the service is reached through another name (a proxy, a dedicated
//! ping host). Answers show ping URLs under that base, and the token in such a URL is
//! a working ping on the service's own `/ping/{token}` route.

mod serve_support;

use reqwest::Method;
use serde_json::{Value, json};
use serve_support::Serve;

#[tokio::test]
async fn ping_urls_are_shown_under_the_configured_base_and_ping() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start_with_env(
        dir.path(),
        &[("OUTPOST_PING_URL", "https://pings.example.test/hb/")],
    );
    let creds = serve.credentials();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let api = |method: Method, path: &str| {
        http.request(method, format!("{}{path}", serve.base))
            .bearer_auth(creds["apiKey"].as_str().unwrap())
            .header("x-service-account", creds["accountId"].as_str().unwrap())
    };
    let resp = api(Method::POST, "/v1/checks/heartbeat")
        .json(&json!({"name": "nightly backup",
            "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let created: Value = resp.json().await.unwrap();
    let ping_url = created["heartbeat"]["pingUrl"].as_str().unwrap().to_owned();
    let token = ping_url
        .strip_prefix("https://pings.example.test/hb/")
        .unwrap_or_else(|| panic!("{ping_url} is not under the configured base"));
    assert!(!token.is_empty() && !token.contains('/'), "{ping_url}");
    let id = created["id"].as_str().unwrap();
    let shown: Value = api(Method::GET, &format!("/v1/checks/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["heartbeat"]["pingUrl"], ping_url.as_str());

    // The token of the shown URL pings through the service's own route.
    let resp = http
        .get(format!("{}/ping/{token}", serve.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // The answer is `[{events, stats}]`: one event, the ping above.
    let events: Value = api(Method::GET, &format!("/v1/checks/heartbeats/{id}/events"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let list = events[0]["events"]
        .as_array()
        .unwrap_or_else(|| panic!("no events in {events}"));
    assert_eq!(list.len(), 1, "{events}");
    assert_eq!(list[0]["state"], "RECEIVED", "{events}");
}
