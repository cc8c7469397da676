//! Public API of the control plane: checks CRUD, validation, auth, error bodies.

mod service_support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use service_support::{TestService, error_body};

#[tokio::test]
async fn check_crud_round_trip() {
    let svc = TestService::start().await;
    let created = svc
        .create_check(json!({"name": "homepage", "tags": ["prod", "web"], "frequency": 5}))
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["name"], "homepage");
    assert_eq!(created["checkType"], "URL");
    assert_eq!(created["frequency"], 5);
    assert_eq!(created["activated"], true);
    assert_eq!(created["muted"], false);
    assert_eq!(created["degradedResponseTime"], 3000);
    assert_eq!(created["maxResponseTime"], 5000);
    assert_eq!(created["request"]["followRedirects"], true);
    assert_eq!(created["request"]["skipSSL"], false);
    assert_eq!(created["request"]["ipFamily"], "IPv4");
    assert_eq!(created["request"]["assertions"], json!([]));
    assert_eq!(created["privateLocations"], json!(["local"]));
    assert!(created["created_at"].is_string());
    assert!(created["updated_at"].is_string());

    let got: Value = svc.get_json(&format!("/v1/checks/{id}")).await;
    assert_eq!(got, created);

    let resp = svc
        .api(Method::PUT, &format!("/v1/checks/url/{id}"))
        .json(&json!({"name": "homepage v2", "activated": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let updated: Value = resp.json().await.unwrap();
    assert_eq!(updated["name"], "homepage v2");
    assert_eq!(updated["activated"], false);
    assert_eq!(
        updated["tags"],
        json!(["prod", "web"]),
        "unchanged fields are kept"
    );
    assert_eq!(updated["created_at"], created["created_at"]);

    svc.create_check(json!({"name": "second"})).await;
    let list: Vec<Value> = svc.get_json("/v1/checks?limit=1&page=2").await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "second");
    let all: Vec<Value> = svc.get_json("/v1/checks").await;
    assert_eq!(all.len(), 2);

    let resp = svc
        .api(Method::DELETE, &format!("/v1/checks/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = svc
        .api(Method::GET, &format!("/v1/checks/{id}"))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    svc.stop().await;
}

#[tokio::test]
async fn validation_errors_name_the_field() {
    let svc = TestService::start().await;
    let base = json!({"name": "x", "request": {"url": "http://127.0.0.1:9/"}, "privateLocations": ["local"]});
    let cases: Vec<(&str, Value, &str)> = vec![
        ("name", json!(""), "name"),
        ("frequency", json!(7), "frequency"),
        ("frequency", json!(0), "frequencyOffset"),
        ("privateLocations", json!(["nowhere"]), "privateLocations"),
        ("privateLocations", json!([]), "privateLocations"),
        ("locations", json!(["eu-west-1"]), "locations"),
        ("request", json!({"url": "ftp://x/"}), "request.url"),
        (
            "request",
            json!({"url": "http://x/", "method": "POST"}),
            "request.method",
        ),
        ("maxResponseTime", json!(50000), "maxResponseTime"),
        ("tags", json!(["ok", ""]), "tags[1]"),
        ("activated", json!("yes"), "activated"),
    ];
    for (field, value, named) in cases {
        let mut body = base.clone();
        body[field] = value;
        let resp = svc
            .api(Method::POST, "/v1/checks/url")
            .json(&body)
            .send()
            .await
            .unwrap();
        let err = error_body(resp, StatusCode::BAD_REQUEST).await;
        let message = err["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{named}:")),
            "{field}: message {message:?} should name {named}"
        );
    }
    let mut body = base.clone();
    body.as_object_mut().unwrap().remove("privateLocations");
    let resp = svc
        .api(Method::POST, "/v1/checks/url")
        .json(&body)
        .send()
        .await
        .unwrap();
    let err = error_body(resp, StatusCode::BAD_REQUEST).await;
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("privateLocations:")
    );

    let resp = svc
        .api(Method::GET, "/v1/checks?limit=101")
        .send()
        .await
        .unwrap();
    let err = error_body(resp, StatusCode::BAD_REQUEST).await;
    assert!(err["message"].as_str().unwrap().starts_with("limit:"));
    let resp = svc
        .api(Method::GET, "/v1/checks?page=0")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    svc.stop().await;
}

#[tokio::test]
async fn unauthenticated_and_mismatched_account_get_401() {
    let svc = TestService::start().await;
    let url = format!("{}/v1/checks", svc.base);
    let resp = svc.http.get(&url).send().await.unwrap();
    error_body(resp, StatusCode::UNAUTHORIZED).await;
    let resp = svc
        .http
        .get(&url)
        .bearer_auth("opk_0000000000000000000000000000000000000000000000000000000000000000")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::UNAUTHORIZED).await;
    let resp = svc
        .http
        .get(&url)
        .header("authorization", "Basic Zm9vOmJhcg==")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::UNAUTHORIZED).await;
    // Right key, wrong account header (both header names are checked).
    for header in ["x-service-account", "x-checkly-account"] {
        let resp = svc
            .http
            .get(&url)
            .bearer_auth(&svc.tenant.api_key)
            .header(header, uuid::Uuid::new_v4().to_string())
            .send()
            .await
            .unwrap();
        error_body(resp, StatusCode::UNAUTHORIZED).await;
    }
    // The agent key is not an API key.
    let resp = svc
        .http
        .get(&url)
        .bearer_auth(&svc.tenant.agent_key)
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::UNAUTHORIZED).await;
    // Without an account header, the key decides.
    let resp = svc
        .http
        .get(&url)
        .bearer_auth(&svc.tenant.api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = svc
        .http
        .get(&url)
        .bearer_auth(&svc.tenant.api_key)
        .header("x-checkly-account", svc.tenant.account.id.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    svc.stop().await;
}

#[tokio::test]
async fn another_accounts_objects_are_not_found() {
    let svc = TestService::start().await;
    let check = svc.create_check(json!({"name": "mine"})).await;
    let id = check["id"].as_str().unwrap();
    let session = &svc.trigger_ids(&[id]).await[0];
    let session_id = session["checkSessionId"].as_str().unwrap();
    let other = svc.other_tenant("elsewhere").await;
    let as_other = |method: Method, path: &str| svc.api_as(&other, method, path);
    for (method, path) in [
        (Method::GET, format!("/v1/checks/{id}")),
        (Method::DELETE, format!("/v1/checks/{id}")),
        (Method::GET, format!("/v1/check-sessions/{session_id}")),
        (Method::GET, format!("/v2/check-sessions/{session_id}")),
        (
            Method::GET,
            format!("/v2/check-sessions/{session_id}/completion?maxWaitSeconds=1"),
        ),
        (
            Method::POST,
            format!("/v1/check-sessions/{session_id}/cancel"),
        ),
        (Method::GET, format!("/v1/check-results/{id}")),
    ] {
        let resp = as_other(method.clone(), &path).send().await.unwrap();
        error_body(resp, StatusCode::NOT_FOUND).await;
    }
    let resp = as_other(Method::PUT, &format!("/v1/checks/url/{id}"))
        .json(&json!({"name": "stolen"}))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    // Triggering another account's check id matches nothing.
    let resp = as_other(Method::POST, "/v2/check-sessions/trigger")
        .json(&json!({"target": {"checkId": [id]}}))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    // A check of the other account cannot name this account's location.
    let resp = as_other(Method::POST, "/v1/checks/url")
        .json(&json!({"name": "x", "request": {"url": "http://127.0.0.1:9/"}, "privateLocations": ["local"]}))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    // The owner still sees everything.
    let resp = svc
        .api(Method::GET, &format!("/v1/checks/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    svc.stop().await;
}

#[tokio::test]
async fn bad_input_gets_json_errors_never_5xx() {
    let svc = TestService::start().await;
    // Malformed JSON.
    let resp = svc
        .api(Method::POST, "/v1/checks/url")
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    // JSON that is not an object.
    let resp = svc
        .api(Method::POST, "/v1/checks/url")
        .json(&json!([1, 2]))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    // Wrong content type.
    let resp = svc
        .api(Method::POST, "/v1/checks/url")
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::UNSUPPORTED_MEDIA_TYPE).await;
    // Over the 1 MiB body limit, declared and streamed (chunked, no content-length).
    let big = format!("{{\"name\": \"{}\"}}", "x".repeat(1024 * 1024 + 10));
    let resp = svc
        .api(Method::POST, "/v1/checks/url")
        .header("content-type", "application/json")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::PAYLOAD_TOO_LARGE).await;
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = big
        .into_bytes()
        .chunks(64 * 1024)
        .map(|c| Ok(c.to_vec()))
        .collect();
    let resp = svc
        .api(Method::POST, "/v1/checks/url")
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::PAYLOAD_TOO_LARGE).await;
    // Unknown route, wrong method, malformed ids.
    let resp = svc
        .api(Method::GET, "/v1/nothing-here")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    let resp = svc.http.get(format!("{}/", svc.base)).send().await.unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    let resp = svc.api(Method::PATCH, "/v1/checks").send().await.unwrap();
    error_body(resp, StatusCode::METHOD_NOT_ALLOWED).await;
    let resp = svc
        .api(Method::GET, "/v1/checks/not-a-uuid")
        .send()
        .await
        .unwrap();
    let err = error_body(resp, StatusCode::BAD_REQUEST).await;
    assert!(err["message"].as_str().unwrap().starts_with("id:"));
    let resp = svc
        .api(Method::GET, "/v1/check-sessions/zzz")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    // Trigger with a malformed target.
    let resp = svc
        .api(Method::POST, "/v2/check-sessions/trigger")
        .json(&json!({"target": {"checkId": ["nope"]}}))
        .send()
        .await
        .unwrap();
    let err = error_body(resp, StatusCode::BAD_REQUEST).await;
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("target.checkId[0]")
    );
    let resp = svc
        .api(Method::POST, "/v2/check-sessions/trigger")
        .json(&json!({"target": {"matchTags": "prod"}}))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    let resp = svc
        .api(
            Method::GET,
            &format!(
                "/v2/check-sessions/{}/completion?maxWaitSeconds=99",
                uuid::Uuid::new_v4()
            ),
        )
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    svc.stop().await;
}
