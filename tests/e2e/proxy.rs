//! A private location's proxy (`proxyUrl`), end to end: a location created through the
//! API with a proxy, a real `outpost agent` with the location's key, checks triggered
//! through the API. API checks reach an HTTPS target through a CONNECT tunnel and an
//! HTTP target in absolute form, both with the proxy's credentials; a URL monitor of
//! the same location goes direct; a proxy that refuses the credentials set later gives
//! a failed result naming its refusal, and the password is in no result and no log.

use reqwest::Method;
use serde_json::{Value, json};

use super::finals;
use super::harness::{Agent, ControlPlane, free_port};
use super::proxy_support::{ProxySeen, Target, TestProxy, basic};

const USER: &str = "outpost-agent";
const PASSWORD: &str = "e2e-Pr0xy-pa55";
const WRONG: &str = "e2e-Wr0ng-pa55";
const SLUG: &str = "behind-proxy";

/// Creates a check of `kind` (`api` or `url`) on the proxied location; returns its id.
async fn create_check(cp: &ControlPlane, kind: &str, name: &str, request: Value) -> String {
    let resp = cp
        .api(Method::POST, &format!("/v1/checks/{kind}"))
        .json(&json!({
            "name": name,
            "activated": true,
            "frequency": 1440,
            "privateLocations": [SLUG],
            "request": request,
        }))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(status, 201, "{v}");
    v["id"].as_str().unwrap().to_owned()
}

/// The stored FINAL result of a finished session, as `GET /v1/check-results` shows it
/// (the raw text, for "appears nowhere" assertions, and parsed).
async fn stored_result(cp: &ControlPlane, session: &Value) -> (String, Value) {
    let f = finals(session);
    assert_eq!(f.len(), 1, "one FINAL result: {session}");
    let check_id = session["checkId"].as_str().unwrap();
    let result_id = f[0]["checkResultId"].as_str().unwrap();
    let text = cp
        .api(
            Method::GET,
            &format!("/v1/check-results/{check_id}/{result_id}"),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let v = serde_json::from_str(&text).unwrap();
    (text, v)
}

fn assert_secret_absent(what: &str, text: &str) {
    for password in [PASSWORD, WRONG] {
        let token = basic(USER, password);
        let token = token.trim_start_matches("Basic ").trim_end_matches('=');
        assert!(
            !text.contains(password),
            "{what} holds the password:\n{text}"
        );
        assert!(!text.contains(token), "{what} holds the token:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_checks_of_a_location_with_a_proxy_go_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let proxy = TestProxy::start(Some((USER, PASSWORD))).await;
    let https = Target::https_self_signed().await;
    let http = Target::http().await;
    let cp = ControlPlane::start(&dir.path().join("data"), free_port(), 15).await;

    let resp = cp
        .api(Method::POST, "/v1/private-locations")
        .json(&json!({"name": "Behind a proxy", "slugName": SLUG,
                      "proxyUrl": proxy.url(Some((USER, PASSWORD)))}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let location: Value = resp.json().await.unwrap();
    assert_eq!(
        location["proxyUrl"],
        format!("http://{USER}:********@{}", proxy.addr)
    );
    let location_id = location["id"].as_str().unwrap().to_owned();
    let key: Value = cp
        .json(
            Method::POST,
            &format!("/v1/private-locations/{location_id}/keys"),
        )
        .await;
    let agent = Agent::start_with_key(
        cp.port,
        key["rawKey"].as_str().unwrap(),
        &dir.path().join("spool"),
        &[("NETWORK_DIAGNOSTICS", "false")],
    );
    agent.await_ready().await;

    let status_200 = json!([{"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"}]);
    let api_https = create_check(
        &cp,
        "api",
        "api over https",
        json!({"method": "GET", "url": https.url("/secure?via=tunnel"), "skipSSL": true,
               "assertions": status_200}),
    )
    .await;
    let api_http = create_check(
        &cp,
        "api",
        "api over http",
        json!({"method": "GET", "url": http.url("/plain"), "assertions": status_200}),
    )
    .await;
    let url_monitor = create_check(
        &cp,
        "url",
        "url monitor",
        json!({"url": http.url("/direct"), "assertions": status_200}),
    )
    .await;

    let sessions = cp.trigger(&[&api_https, &api_http, &url_monitor]).await;
    assert_eq!(sessions.len(), 3);
    for id in &sessions {
        let s = cp.await_session(id).await;
        assert_eq!(s["status"], "PASSED", "{s}");
        assert_eq!(s["runLocations"], json!([SLUG]), "{s}");
        let (text, result) = stored_result(&cp, &s).await;
        assert_eq!(result["hasErrors"], false, "{text}");
        assert_secret_absent("a stored result", &text);
        if s["checkId"] == api_https.as_str() {
            let phases = &result["timingPhases"];
            assert!(phases["tcp"].as_f64().unwrap() > 0.0, "{phases}");
            assert!(phases["tls"].as_f64().unwrap() > 0.0, "{phases}");
        }
    }

    // The proxy saw exactly the two API checks, each with the location's credentials:
    // a tunnel to the HTTPS target, the HTTP request in absolute form.
    let mut seen = proxy.seen();
    seen.sort_by(|a, b| a.method.cmp(&b.method));
    let auth = Some(basic(USER, PASSWORD));
    assert_eq!(
        seen,
        [
            ProxySeen {
                method: "CONNECT".into(),
                target: https.authority(),
                proxy_authorization: auth.clone(),
                host: Some(https.authority()),
            },
            ProxySeen {
                method: "GET".into(),
                target: http.url("/plain"),
                proxy_authorization: auth,
                host: Some(http.authority()),
            },
        ]
    );
    let https_seen: Vec<String> = https.seen().into_iter().map(|s| s.uri).collect();
    assert_eq!(https_seen, ["/secure?via=tunnel"]);
    let mut http_seen: Vec<String> = http.seen().into_iter().map(|s| s.uri).collect();
    http_seen.sort();
    // The URL monitor reached its target directly.
    assert_eq!(http_seen, ["/direct", "/plain"]);

    // New credentials the proxy refuses: jobs leased after the change use them.
    let resp = cp
        .api(Method::PUT, &format!("/v1/private-locations/{location_id}"))
        .json(&json!({"name": "Behind a proxy", "proxyUrl": proxy.url(Some((USER, WRONG)))}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let session = cp.trigger(&[&api_https]).await;
    let s = cp.await_session(&session[0]).await;
    assert_eq!(s["status"], "FAILED", "{s}");
    let (text, result) = stored_result(&cp, &s).await;
    assert_eq!(result["hasErrors"], true, "{text}");
    assert_eq!(
        result["apiCheckResult"]["requestError"],
        format!(
            "the proxy {} refused the tunnel to {}: HTTP/1.1 407 Proxy Authentication Required",
            proxy.addr,
            https.authority()
        ),
        "{text}"
    );
    assert_secret_absent("the refused result", &text);
    let seen = proxy.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[2].method, "CONNECT");
    assert_eq!(seen[2].proxy_authorization, Some(basic(USER, WRONG)));
    assert_eq!(https.seen().len(), 1, "nothing got through the refusal");

    // Neither process logged the password (both log at DEBUG).
    assert_secret_absent("the control plane's log", &cp.proc.output());
    assert_secret_absent("the agent's log", &agent.proc.output());
}
