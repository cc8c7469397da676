//! `/v1/private-locations` and `/v1/locations` against an in-process service: CRUD,
//! agent keys (raw once, masked after, at most two active, revoked keys refused by the
//! agent API), metrics, account isolation and validation errors.

mod service_support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use outpost::protocol::{HelloRequest, PROTOCOL_VERSION, paths};
use service_support::{TestAgent, TestService, error_body};

async fn create_location(svc: &TestService, name: &str, slug: &str) -> Value {
    let resp = svc
        .api(Method::POST, "/v1/private-locations")
        .json(&json!({"name": name, "slugName": slug}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    resp.json().await.unwrap()
}

async fn create_key(svc: &TestService, id: &str) -> reqwest::Response {
    svc.api(Method::POST, &format!("/v1/private-locations/{id}/keys"))
        .send()
        .await
        .unwrap()
}

async fn revoke_key(svc: &TestService, id: &str, key_id: &str) -> reqwest::Response {
    svc.api(
        Method::DELETE,
        &format!("/v1/private-locations/{id}/keys/{key_id}"),
    )
    .send()
    .await
    .unwrap()
}

/// The status of a HELLO with `key`.
async fn hello_status(svc: &TestService, key: &str) -> StatusCode {
    let agent = TestAgent::new(&svc.http, &svc.base, key);
    agent
        .post(paths::HELLO)
        .json(&HelloRequest {
            agent_id: agent.id,
            agent_version: "test".into(),
            protocol_version: PROTOCOL_VERSION,
        })
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn crud_of_private_locations() {
    let svc = TestService::start().await;
    let created = create_location(&svc, "Data Center", "dc-1").await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["name"], "Data Center");
    assert_eq!(created["slugName"], "dc-1");
    assert_eq!(created["icon"], "location");
    assert_eq!(created["keys"], json!([]));
    assert!(created["created_at"].is_string());

    let list: Value = svc
        .api(Method::GET, "/v1/private-locations")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let slugs: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["slugName"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, ["local", "dc-1"]);
    // The tenant's own location shows its agent key masked and the agents seen.
    let local = &list[0];
    assert_eq!(local["keys"].as_array().unwrap().len(), 1);
    // The reference requires rawKey in every key: after creation it holds the masked key.
    assert_eq!(local["keys"][0]["rawKey"], local["keys"][0]["maskedKey"]);
    assert!(
        local["keys"][0]["maskedKey"]
            .as_str()
            .unwrap()
            .starts_with("opa_...")
    );
    assert_eq!(local["agentCount"], 0);
    svc.agent().hello().await;
    let local: Value = svc
        .api(
            Method::GET,
            &format!("/v1/private-locations/{}", svc.tenant.location.id),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(local["agentCount"], 1);
    assert_eq!(local["minAgentVersion"], "test");
    assert_eq!(local["runningAgents"][0]["count"], 1);
    // The reference's RunningAgentInfo: id and lastSeenAt, strings.
    let running = &local["runningAgents"][0]["agents"][0];
    assert!(running["id"].is_string(), "{local}");
    assert!(running["lastSeenAt"].is_string(), "{local}");
    assert!(local["lastSeen"].is_string());

    let resp = svc
        .api(Method::PUT, &format!("/v1/private-locations/{id}"))
        .json(&json!({"name": "Renamed", "icon": "location", "proxyUrl": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let updated: Value = resp.json().await.unwrap();
    assert_eq!(updated["name"], "Renamed");
    assert_eq!(updated["slugName"], "dc-1");

    let got: Value = svc
        .api(Method::GET, &format!("/v1/private-locations/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["name"], "Renamed");

    // A duplicate slug is a conflict.
    let resp = svc
        .api(Method::POST, "/v1/private-locations")
        .json(&json!({"name": "Again", "slugName": "dc-1"}))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::CONFLICT).await;

    let resp = svc
        .api(Method::DELETE, &format!("/v1/private-locations/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = svc
        .api(Method::GET, &format!("/v1/private-locations/{id}"))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    let resp = svc
        .api(Method::DELETE, &format!("/v1/private-locations/{id}"))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    svc.stop().await;
}

#[tokio::test]
async fn keys_are_raw_once_masked_after_and_limited_to_two() {
    let svc = TestService::start().await;
    let loc = create_location(&svc, "Keys", "keys").await;
    let id = loc["id"].as_str().unwrap().to_owned();

    let resp = create_key(&svc, &id).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let first: Value = resp.json().await.unwrap();
    let raw = first["rawKey"].as_str().unwrap().to_owned();
    let masked = first["maskedKey"].as_str().unwrap().to_owned();
    assert!(raw.starts_with("opa_"));
    assert!(raw.ends_with(&masked[masked.len() - 4..]));
    assert_ne!(raw, masked);
    assert_eq!(hello_status(&svc, &raw).await, StatusCode::OK);

    // Listed afterwards only masked; the raw key appears in no other answer.
    for path in [
        format!("/v1/private-locations/{id}"),
        "/v1/private-locations".to_owned(),
    ] {
        let text = svc
            .api(Method::GET, &path)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(!text.contains(&raw[4..]), "{path} leaks the key");
        assert!(text.contains(&masked), "{path} lists the masked key");
        assert!(
            text.contains(&format!("\"rawKey\":\"{masked}\"")),
            "{path}: rawKey is the masked key"
        );
    }

    let resp = create_key(&svc, &id).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let second: Value = resp.json().await.unwrap();
    let resp = create_key(&svc, &id).await;
    let body = error_body(resp, StatusCode::CONFLICT).await;
    assert!(
        body["message"].as_str().unwrap().contains("2 active keys"),
        "{body}"
    );

    // Revoking the first key: its agent is refused; a new key fits again.
    let key_id = first["id"].as_str().unwrap();
    let resp = revoke_key(&svc, &id, key_id).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(hello_status(&svc, &raw).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        hello_status(&svc, second["rawKey"].as_str().unwrap()).await,
        StatusCode::OK
    );
    let resp = revoke_key(&svc, &id, key_id).await;
    error_body(resp, StatusCode::NOT_FOUND).await;
    let resp = create_key(&svc, &id).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    svc.stop().await;
}

#[tokio::test]
async fn location_in_use_by_checks_is_not_deleted() {
    let svc = TestService::start().await;
    let loc = create_location(&svc, "Used", "used").await;
    let id = loc["id"].as_str().unwrap().to_owned();
    let check = svc
        .create_check(json!({"privateLocations": ["used"], "activated": false}))
        .await;
    let resp = svc
        .api(Method::DELETE, &format!("/v1/private-locations/{id}"))
        .send()
        .await
        .unwrap();
    let body = error_body(resp, StatusCode::CONFLICT).await;
    assert_eq!(body["error"], "Conflict");
    assert!(
        body["message"].as_str().unwrap().contains("1 check"),
        "{body}"
    );

    let check_id = check["id"].as_str().unwrap();
    let resp = svc
        .api(Method::DELETE, &format!("/v1/checks/{check_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = svc
        .api(Method::DELETE, &format!("/v1/private-locations/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    svc.stop().await;
}

#[tokio::test]
async fn other_accounts_locations_are_not_found() {
    let svc = TestService::start().await;
    let other = svc.other_tenant("elsewhere").await;
    let theirs = other.location.id;
    let mine = svc.tenant.location.id;
    for (method, path) in [
        (Method::GET, format!("/v1/private-locations/{theirs}")),
        (Method::DELETE, format!("/v1/private-locations/{theirs}")),
        (Method::POST, format!("/v1/private-locations/{theirs}/keys")),
        (
            Method::GET,
            format!("/v1/private-locations/{theirs}/metrics?from=0&to=9999999999"),
        ),
    ] {
        let resp = svc.api(method.clone(), &path).send().await.unwrap();
        error_body(resp, StatusCode::NOT_FOUND).await;
    }
    let resp = svc
        .api(Method::PUT, &format!("/v1/private-locations/{theirs}"))
        .json(&json!({"name": "Mine now"}))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    // Their listing does not show my location, and theirs still exists untouched.
    let resp = svc
        .api_as(&other, Method::GET, "/v1/private-locations")
        .send()
        .await
        .unwrap();
    let list: Value = resp.json().await.unwrap();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [theirs.to_string()]);
    assert!(!ids.contains(&mine.to_string().as_str()));
    assert_eq!(hello_status(&svc, &other.agent_key).await, StatusCode::OK);
    svc.stop().await;
}

#[tokio::test]
async fn validation_errors_name_the_field() {
    let svc = TestService::start().await;
    let cases = [
        (json!({"slugName": "x"}), "name"),
        (json!({"name": "", "slugName": "x"}), "name"),
        (json!({"name": 5, "slugName": "x"}), "name"),
        (json!({"name": "A"}), "slugName"),
        (json!({"name": "A", "slugName": "Has Space"}), "slugName"),
        (json!({"name": "A", "slugName": "us-east-1"}), "slugName"),
        (json!({"name": "A", "slugName": "a".repeat(31)}), "slugName"),
        (
            json!({"name": "A", "slugName": "ok", "proxyUrl": "http://p:3128"}),
            "proxyUrl",
        ),
        (json!({"name": "A", "slugName": "ok", "icon": 3}), "icon"),
    ];
    for (body, field) in cases {
        let resp = svc
            .api(Method::POST, "/v1/private-locations")
            .json(&body)
            .send()
            .await
            .unwrap();
        let err = error_body(resp, StatusCode::BAD_REQUEST).await;
        assert!(
            err["message"].as_str().unwrap().starts_with(field),
            "{body} -> {err}"
        );
    }
    let id = svc.tenant.location.id;
    for (body, field) in [
        (json!({}), "name"),
        (json!({"name": "B", "slugName": "other"}), "slugName"),
    ] {
        let resp = svc
            .api(Method::PUT, &format!("/v1/private-locations/{id}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let err = error_body(resp, StatusCode::BAD_REQUEST).await;
        assert!(err["message"].as_str().unwrap().starts_with(field), "{err}");
    }
    let resp = svc
        .api(Method::GET, "/v1/private-locations/not-a-uuid")
        .send()
        .await
        .unwrap();
    let err = error_body(resp, StatusCode::BAD_REQUEST).await;
    assert!(err["message"].as_str().unwrap().starts_with("id"), "{err}");
    for (query, field) in [
        ("to=9999999999", "from"),
        ("from=0", "to"),
        ("from=yesterday&to=0", "from"),
    ] {
        let resp = svc
            .api(
                Method::GET,
                &format!("/v1/private-locations/{id}/metrics?{query}"),
            )
            .send()
            .await
            .unwrap();
        let err = error_body(resp, StatusCode::BAD_REQUEST).await;
        assert!(
            err["message"].as_str().unwrap().starts_with(field),
            "{query} -> {err}"
        );
    }
    // Without a key: 401.
    let resp = svc
        .http
        .get(format!("{}/v1/private-locations", svc.base))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::UNAUTHORIZED).await;
    svc.stop().await;
}

#[tokio::test]
async fn metrics_show_the_live_queue_and_public_locations_are_empty() {
    let svc = TestService::start().await;
    let check = svc.create_check(json!({"activated": false})).await;
    svc.trigger_ids(&[check["id"].as_str().unwrap()]).await;
    svc.agent().hello().await;
    let now = chrono::Utc::now().timestamp();
    let id = svc.tenant.location.id;
    let metrics: Value = svc
        .api(
            Method::GET,
            &format!(
                "/v1/private-locations/{id}/metrics?from={}&to={}",
                now - 60,
                now + 3600
            ),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        metrics["timestamps"].as_array().unwrap().len(),
        1,
        "{metrics}"
    );
    assert_eq!(metrics["queueSize"], json!([1]), "{metrics}");
    assert_eq!(metrics["leasedJobs"], json!([0]), "{metrics}");
    assert_eq!(metrics["agentCount"], json!([1]), "{metrics}");
    assert!(metrics["oldestScheduledCheckRun"][0].is_number());

    // Leasing the job moves it from queued to leased.
    let jobs = svc.agent().lease(1, 0).await;
    assert_eq!(jobs.len(), 1);
    let metrics: Value = svc
        .api(
            Method::GET,
            &format!(
                "/v1/private-locations/{id}/metrics?from={}&to={}",
                now - 60,
                now + 3600
            ),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metrics["queueSize"], json!([0]), "{metrics}");
    assert_eq!(metrics["leasedJobs"], json!([1]), "{metrics}");

    // A window in the past holds no sample.
    let past: Value = svc
        .api(
            Method::GET,
            &format!(
                "/v1/private-locations/{id}/metrics?from={}&to={}",
                now - 7200,
                now - 3600
            ),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(past["timestamps"], json!([]));

    let resp = svc.api(Method::GET, "/v1/locations").send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let public: Value = resp.json().await.unwrap();
    assert_eq!(public, json!([]));
    svc.stop().await;
}

/// Keys are answered from memory once the key cache is in sync; revoking a key or
/// deleting its location through the API refuses it with the next request all the same.
#[tokio::test]
async fn revoked_and_deleted_keys_are_refused_at_once_when_answered_from_memory() {
    let svc = TestService::start().await;
    let loc = create_location(&svc, "Cached", "cached").await;
    let id = loc["id"].as_str().unwrap().to_owned();
    let first: Value = create_key(&svc, &id).await.json().await.unwrap();
    let second: Value = create_key(&svc, &id).await.json().await.unwrap();
    let (first_raw, second_raw) = (
        first["rawKey"].as_str().unwrap().to_owned(),
        second["rawKey"].as_str().unwrap().to_owned(),
    );
    // The cache has seen the key creations; these lookups are kept.
    svc.handle.store().key_cache_synced().await;
    for key in [&first_raw, &second_raw] {
        assert_eq!(hello_status(&svc, key).await, StatusCode::OK);
        assert_eq!(hello_status(&svc, key).await, StatusCode::OK);
    }
    // A refused key is refused again (remembered, still refused).
    let unknown = format!("opa_{}", "0".repeat(64));
    for _ in 0..2 {
        assert_eq!(hello_status(&svc, &unknown).await, StatusCode::UNAUTHORIZED);
    }

    let key_id = first["id"].as_str().unwrap();
    let resp = revoke_key(&svc, &id, key_id).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        hello_status(&svc, &first_raw).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(hello_status(&svc, &second_raw).await, StatusCode::OK);

    svc.handle.store().key_cache_synced().await;
    assert_eq!(hello_status(&svc, &second_raw).await, StatusCode::OK);
    let resp = svc
        .api(Method::DELETE, &format!("/v1/private-locations/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        hello_status(&svc, &second_raw).await,
        StatusCode::UNAUTHORIZED
    );

    // The same for API keys revoked in this process (the admin code path).
    let (info, api_key) = svc
        .handle
        .store()
        .create_api_key(svc.tenant.account.id, "second")
        .await
        .unwrap();
    svc.handle.store().key_cache_synced().await;
    let list = |key: String| {
        let svc = &svc;
        async move {
            svc.http
                .get(format!("{}/v1/private-locations", svc.base))
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(list(api_key.clone()).await, StatusCode::OK);
    assert_eq!(list(api_key.clone()).await, StatusCode::OK);
    assert!(
        outpost::service::admin::revoke_api_key(svc.handle.store(), svc.tenant.account.id, info.id)
            .await
            .unwrap()
    );
    assert_eq!(list(api_key).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        list(svc.tenant.api_key.clone()).await,
        StatusCode::OK,
        "other keys are unaffected"
    );
    svc.stop().await;
}
