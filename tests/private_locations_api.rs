//! `/v1/private-locations` and `/v1/locations` against an in-process service: CRUD,
//! agent keys (raw once, masked after, at most two active, revoked keys refused by the
//! agent API), metrics, account isolation and validation errors, and `proxyUrl`
//! (validated, shown masked, its password kept when the mask is sent back, handed to
//! agents with the jobs they lease).

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

    let list: Value = svc.get_json("/v1/private-locations").await;
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

    let got: Value = svc.get_json(&format!("/v1/private-locations/{id}")).await;
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
            json!({"name": "A", "slugName": "ok", "proxyUrl": "socks5://p:1080"}),
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

/// The password of the proxy URLs below; it must never be in an answer.
const PROXY_PASSWORD: &str = "s3cret-Pr0xy";

/// POSTs or PUTs `body` and returns the 400's message, which must name `proxyUrl` and
/// not quote the password.
async fn refused_proxy(svc: &TestService, method: Method, path: &str, body: Value) -> String {
    let resp = svc.api(method, path).json(&body).send().await.unwrap();
    let err = error_body(resp, StatusCode::BAD_REQUEST).await;
    let message = err["message"].as_str().unwrap().to_owned();
    assert!(message.starts_with("proxyUrl: "), "{body} -> {message}");
    assert!(!message.contains(PROXY_PASSWORD), "{message}");
    message
}

/// The proxy URL of the next job leased with `key` for a fresh trigger of `check_id`.
async fn leased_proxy(svc: &TestService, key: &str, check_id: &str) -> Option<String> {
    svc.trigger_one(check_id).await;
    let jobs = TestAgent::new(&svc.http, &svc.base, key).lease(10, 5).await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    // The job's Debug output never shows the password either.
    assert!(!format!("{:?}", jobs[0]).contains(PROXY_PASSWORD));
    jobs[0].proxy_url.clone()
}

#[tokio::test]
async fn proxy_url_is_validated_with_errors_naming_it() {
    let svc = TestService::start().await;
    let long = format!("http://h:1/{}", "a".repeat(2048));
    for (proxy, says) in [
        (
            json!(format!("socks5://u:{PROXY_PASSWORD}@h:1080")),
            "http:// or https://",
        ),
        (
            json!(format!("http://u:{PROXY_PASSWORD}@h:3128/path")),
            "path",
        ),
        (
            json!(format!("http://u:{PROXY_PASSWORD}@h:3128/?q=1")),
            "query",
        ),
        (
            json!(format!("http://u:{PROXY_PASSWORD}@h:3128#f")),
            "fragment",
        ),
        (json!("proxy.example:3128"), "http:// or https://"),
        (
            json!(format!("http://u:{PROXY_PASSWORD}@:3128")),
            "valid URL",
        ),
        (
            json!(format!("http://u:{PROXY_PASSWORD}@h:99999")),
            "valid URL",
        ),
        (json!("http://h:0"), "port"),
        (json!(3128), "string"),
        (json!({"url": "http://h"}), "string"),
        (json!(long), "2048"),
        // The mask is not a password: nothing stored to keep.
        (json!("http://u:********@h:3128"), "masked password"),
    ] {
        let body = json!({"name": "P", "slugName": "p", "proxyUrl": proxy});
        let message = refused_proxy(&svc, Method::POST, "/v1/private-locations", body).await;
        assert!(message.contains(says), "{proxy} -> {message}");
        let id = svc.tenant.location.id;
        let body = json!({"name": "P", "proxyUrl": proxy});
        let path = format!("/v1/private-locations/{id}");
        let message = refused_proxy(&svc, Method::PUT, &path, body).await;
        assert!(message.contains(says), "PUT {proxy} -> {message}");
    }
    // Nothing was created or changed.
    let list: Value = svc.get_json("/v1/private-locations").await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["proxyUrl"], Value::Null);
    svc.stop().await;
}

#[tokio::test]
async fn proxy_url_is_masked_kept_and_handed_to_agents_with_each_lease() {
    let svc = TestService::start().await;
    let full = format!("http://agent:{PROXY_PASSWORD}@127.0.0.1:3128");
    let masked = "http://agent:********@127.0.0.1:3128";
    let resp = svc
        .api(Method::POST, "/v1/private-locations")
        .json(&json!({"name": "Behind a proxy", "slugName": "behind", "proxyUrl": full}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let text = resp.text().await.unwrap();
    assert!(!text.contains(PROXY_PASSWORD), "{text}");
    let created: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(created["proxyUrl"], masked);
    let id = created["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/private-locations/{id}");

    // GET and the list show it masked too.
    for (route, pick) in [(path.as_str(), None), ("/v1/private-locations", Some(1))] {
        let text = svc
            .api(Method::GET, route)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(!text.contains(PROXY_PASSWORD), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        let location = match pick {
            Some(i) => v[i].clone(),
            None => v,
        };
        assert_eq!(location["id"], id.as_str());
        assert_eq!(location["proxyUrl"], masked, "{route}");
    }

    // Agents of the location get the URL with its password with each job.
    let key = create_key(&svc, &id).await.json::<Value>().await.unwrap()["rawKey"]
        .as_str()
        .unwrap()
        .to_owned();
    let check = svc
        .create_check(json!({"name": "api", "privateLocations": ["behind"]}))
        .await;
    let check_id = check["id"].as_str().unwrap().to_owned();
    assert_eq!(
        leased_proxy(&svc, &key, &check_id).await.as_deref(),
        Some(full.as_str())
    );
    // Another location's jobs carry no proxy.
    let local_check = svc.create_check(json!({"name": "local"})).await;
    let local_key = svc.tenant.agent_key.clone();
    assert_eq!(
        leased_proxy(&svc, &local_key, local_check["id"].as_str().unwrap()).await,
        None
    );

    // The masked form sent back keeps the stored password.
    let resp = svc
        .api(Method::PUT, &path)
        .json(&json!({"name": "Renamed", "proxyUrl": masked}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    assert!(!text.contains(PROXY_PASSWORD), "{text}");
    let updated: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(updated["name"], "Renamed");
    assert_eq!(updated["proxyUrl"], masked);
    assert_eq!(
        leased_proxy(&svc, &key, &check_id).await.as_deref(),
        Some(full.as_str())
    );

    // ... but only for the same proxy: not to send the password elsewhere.
    let message = refused_proxy(
        &svc,
        Method::PUT,
        &path,
        json!({"name": "Renamed", "proxyUrl": "http://agent:********@elsewhere.example:3128"}),
    )
    .await;
    assert!(message.contains("masked password"), "{message}");

    // A new URL takes effect for the jobs leased after the change.
    let resp = svc
        .api(Method::PUT, &path)
        .json(&json!({"name": "Renamed", "proxyUrl": "https://proxy.example"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let updated: Value = resp.json().await.unwrap();
    assert_eq!(updated["proxyUrl"], "https://proxy.example");
    assert_eq!(
        leased_proxy(&svc, &key, &check_id).await.as_deref(),
        Some("https://proxy.example")
    );

    // An update without proxyUrl (or with null or "") removes it; each is seen to.
    let with_proxy =
        json!({"name": "Direct", "proxyUrl": format!("http://a:{PROXY_PASSWORD}@h:1")});
    for clearing in [
        json!({"name": "Direct", "proxyUrl": null}),
        json!({"name": "Direct", "proxyUrl": ""}),
        json!({"name": "Direct"}),
    ] {
        for (body, expect_proxy) in [(&with_proxy, true), (&clearing, false)] {
            let resp = svc.api(Method::PUT, &path).json(body).send().await.unwrap();
            assert_eq!(resp.status(), StatusCode::OK);
            let answer: Value = resp.json().await.unwrap();
            assert_eq!(
                answer["proxyUrl"].is_string(),
                expect_proxy,
                "{body}: {answer}"
            );
            let shown: Value = svc.get_json(&path).await;
            assert_eq!(
                shown["proxyUrl"].is_string(),
                expect_proxy,
                "{body}: {shown}"
            );
        }
    }
    let got: Value = svc.get_json(&path).await;
    assert_eq!(got["proxyUrl"], Value::Null, "{got}");
    assert_eq!(leased_proxy(&svc, &key, &check_id).await, None);
    svc.stop().await;
}
