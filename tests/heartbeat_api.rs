//! Heartbeat checks through the public API: validation naming the option and its
//! range, the ping URL, no scheduling, updates, alert channels and subscriptions, and
//! the events endpoints with exact success ratios on a constructed history.

mod heartbeat_support;
mod service_support;

use heartbeat_support::*;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use service_support::{TestService, error_body};
use uuid::Uuid;

use outpost::model::HeartbeatState;
use outpost::service::store::NewEvent;

async fn send(svc: &TestService, method: Method, path: &str, body: &Value) -> reqwest::Response {
    svc.api(method, path).json(body).send().await.unwrap()
}

async fn get_json(svc: &TestService, path: &str) -> Value {
    let resp = svc.api(Method::GET, path).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "GET {path}");
    resp.json().await.unwrap()
}

/// A 400 whose message is returned.
async fn bad_request(resp: reqwest::Response) -> String {
    let body = error_body(resp, StatusCode::BAD_REQUEST).await;
    body["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn create_validates_and_names_options_with_their_ranges() {
    let (svc, _clock) = start_manual().await;
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"name": "n", "heartbeat": {"period": 10, "periodUnit": "seconds", "grace": 0, "graceUnit": "seconds"}}),
            "heartbeat.period: must be between 30 seconds and 365 days (got 10 seconds)",
        ),
        (
            json!({"name": "n", "heartbeat": {"period": 366, "periodUnit": "days", "grace": 0, "graceUnit": "seconds"}}),
            "heartbeat.period: must be between 30 seconds and 365 days (got 366 days)",
        ),
        (
            json!({"name": "n", "heartbeat": {"period": 1, "periodUnit": "hours", "grace": 400, "graceUnit": "days"}}),
            "heartbeat.grace: must be between 0 seconds and 365 days (got 400 days)",
        ),
        (
            json!({"name": "n", "heartbeat": {"period": 1, "periodUnit": "hours", "grace": -5, "graceUnit": "minutes"}}),
            "heartbeat.grace: must be between 0 seconds and 365 days (got -5 minutes)",
        ),
        (
            json!({"name": "n", "heartbeat": {"period": 1, "periodUnit": "weeks", "grace": 0, "graceUnit": "days"}}),
            "heartbeat.periodUnit: must be one of seconds, minutes, hours, days (got \"weeks\")",
        ),
        (json!({"name": "n"}), "heartbeat: is required"),
        (
            json!({"heartbeat": {"period": 1, "periodUnit": "hours", "grace": 0, "graceUnit": "days"}}),
            "name: is required",
        ),
    ];
    for (body, expected) in cases {
        let resp = send(&svc, Method::POST, "/v1/checks/heartbeat", &body).await;
        assert_eq!(bad_request(resp).await, expected, "{body}");
    }
    let prefixes: Vec<(Value, &str)> = vec![
        (
            json!({"name": "n", "description": "d".repeat(501),
                "heartbeat": {"period": 1, "periodUnit": "hours", "grace": 0, "graceUnit": "days"}}),
            "description:",
        ),
        (
            json!({"name": "n", "alertChannelSubscriptions": [{"alertChannelId": 999, "activated": true}],
                "heartbeat": {"period": 1, "periodUnit": "hours", "grace": 0, "graceUnit": "days"}}),
            "alertChannelSubscriptions[0].alertChannelId:",
        ),
        (
            json!({"name": "n", "privateLocations": ["local"],
                "heartbeat": {"period": 1, "periodUnit": "hours", "grace": 0, "graceUnit": "days"}}),
            "privateLocations:",
        ),
    ];
    for (body, prefix) in prefixes {
        let resp = send(&svc, Method::POST, "/v1/checks/heartbeat", &body).await;
        let message = bad_request(resp).await;
        assert!(
            message.starts_with(prefix),
            "{message:?} should start with {prefix}"
        );
    }
    // Both ends of the ranges and a 500-character description are fine.
    let mut edge = heartbeat_body("edges", 30, 0);
    edge["description"] = json!("é".repeat(500));
    create_heartbeat(&svc, edge).await;
    create_heartbeat(
        &svc,
        json!({"name": "long", "heartbeat": {"period": 365, "periodUnit": "days", "grace": 365, "graceUnit": "days"}}),
    )
    .await;
    // Nothing invalid was stored.
    let all = get_json(&svc, "/v1/checks?checkType=HEARTBEAT").await;
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    svc.stop().await;
}

#[tokio::test]
async fn ping_url_is_shown_and_the_token_is_a_separate_secret() {
    let (svc, _clock) = start_manual().await;
    let created = create_heartbeat(&svc, heartbeat_body("nightly backup", 3600, 600)).await;
    let (id, url) = id_and_url(&created);
    assert_eq!(created["checkType"], "HEARTBEAT");
    assert_eq!(created["activated"], true);
    assert_eq!(created["muted"], false);
    assert_eq!(created["tags"], json!([]));
    assert_eq!(created["description"], Value::Null);
    assert_eq!(created["alertChannelSubscriptions"], json!([]));
    assert_eq!(created["heartbeat"]["period"], 3600);
    assert_eq!(created["heartbeat"]["periodUnit"], "seconds");
    let token = created["heartbeat"]["pingToken"].as_str().unwrap();
    assert_eq!(url, format!("{}/ping/{token}", svc.base));
    assert_eq!(svc.handle.ping_url(), format!("{}/ping", svc.base));
    assert!(!token.contains(&id) && !id.contains(token));
    // 32 base64url characters: 192 random bits.
    assert_eq!(token.len(), 32);
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );

    let shown = get_json(&svc, &format!("/v1/checks/{id}")).await;
    assert_eq!(shown, created);
    let listed = get_json(&svc, "/v1/checks?checkType=HEARTBEAT").await;
    assert_eq!(listed[0]["heartbeat"]["pingUrl"], url.as_str());

    // A token sent by the client is ignored; another check gets another token.
    let mut body = heartbeat_body("other", 60, 0);
    body["heartbeat"]["pingToken"] = json!(token);
    let other = create_heartbeat(&svc, body).await;
    assert_ne!(
        other["heartbeat"]["pingToken"],
        created["heartbeat"]["pingToken"]
    );
    svc.stop().await;
}

#[tokio::test]
async fn heartbeat_checks_are_never_scheduled_or_triggered() {
    let (svc, _clock) = start_manual().await;
    let created = create_heartbeat(&svc, heartbeat_body("passive", 30, 0)).await;
    let id: Uuid = created["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(svc.handle.store().check_schedule(id).await.unwrap(), None);
    let later = chrono::Utc::now() + chrono::Duration::days(1);
    assert_eq!(svc.handle.run_scheduler(later).await.unwrap(), 0);
    let resp = svc
        .api(Method::POST, "/v2/check-sessions/trigger")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    let resp = svc
        .api(Method::POST, "/v2/check-sessions/trigger")
        .json(&json!({"target": {"checkId": [id]}}))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    svc.stop().await;
}

#[tokio::test]
async fn updates_through_typed_and_generic_routes_keep_the_token() {
    let (svc, _clock) = start_manual().await;
    let created = create_heartbeat(&svc, heartbeat_body("job", 60, 0)).await;
    let (id, url) = id_and_url(&created);

    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/checks/heartbeat/{id}"),
        &json!({"heartbeat": {"period": 2, "periodUnit": "hours", "grace": 5, "graceUnit": "minutes"},
            "tags": ["nightly"]}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let updated: Value = resp.json().await.unwrap();
    assert_eq!(updated["heartbeat"]["periodUnit"], "hours");
    assert_eq!(updated["heartbeat"]["pingUrl"], url.as_str());
    assert_eq!(updated["tags"], json!(["nightly"]));
    assert_eq!(updated["name"], "job");
    assert_eq!(updated["created_at"], created["created_at"]);

    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/checks/{id}"),
        &json!({"muted": true}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let updated: Value = resp.json().await.unwrap();
    assert_eq!(updated["muted"], true);
    assert_eq!(updated["heartbeat"]["periodUnit"], "hours");

    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/checks/heartbeat/{id}"),
        &json!({"heartbeat": {"period": 1, "periodUnit": "seconds", "grace": 0, "graceUnit": "seconds"}}),
    )
    .await;
    assert_eq!(
        bad_request(resp).await,
        "heartbeat.period: must be between 30 seconds and 365 days (got 1 seconds)"
    );

    // Wrong typed routes say where to go.
    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/checks/url/{id}"),
        &json!({"name": "x"}),
    )
    .await;
    let message = bad_request(resp).await;
    assert!(
        message.starts_with("checkType:") && message.contains("/v1/checks/heartbeat/"),
        "{message}"
    );
    let url_check = svc.create_check(json!({})).await;
    let url_id = url_check["id"].as_str().unwrap();
    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/checks/heartbeat/{url_id}"),
        &json!({"name": "x"}),
    )
    .await;
    assert!(bad_request(resp).await.starts_with("checkType:"));

    // The deprecated generic create takes heartbeats too.
    let mut body = heartbeat_body("generic", 60, 0);
    body["checkType"] = json!("HEARTBEAT");
    let resp = send(&svc, Method::POST, "/v1/checks", &body).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let generic: Value = resp.json().await.unwrap();
    assert!(
        generic["heartbeat"]["pingUrl"]
            .as_str()
            .unwrap()
            .starts_with(&svc.base)
    );

    // A deleted heartbeat's address is gone.
    let resp = svc
        .api(Method::DELETE, &format!("/v1/checks/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        ping(&svc, &url, Method::POST).await.0,
        StatusCode::NOT_FOUND
    );
    // Events of a deleted check (pings in flight during the delete) are dropped, not
    // an error that would fail the other pings of their batch.
    let gone: Uuid = id.parse().unwrap();
    svc.handle
        .store()
        .insert_heartbeat_events(&[event(gone, HeartbeatState::Received, T0)])
        .await
        .unwrap();
    svc.stop().await;
}

#[tokio::test]
async fn alert_channels_crud_and_subscriptions() {
    let (svc, _clock) = start_manual().await;
    let resp = send(
        &svc,
        Method::POST,
        "/v1/alert-channels",
        &json!({"type": "WEBHOOK", "config": {"name": "ops", "url": "http://127.0.0.1:9/hook",
            "webhookSecret": "s3cret", "headers": [{"key": "X-Team", "value": "ops"}]}}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let hook: Value = resp.json().await.unwrap();
    let hook_id = hook["id"].as_i64().unwrap();
    assert!(hook_id > 0);
    assert_eq!(hook["type"], "WEBHOOK");
    assert_eq!(hook["config"]["webhookSecret"], "*****");
    assert_eq!(hook["config"]["method"], "POST");
    assert_eq!(hook["sendFailure"], true);
    assert_eq!(hook["sendRecovery"], true);
    assert_eq!(hook["autoSubscribe"], false);
    assert_eq!(hook["subscriptions"], json!([]));

    let resp = send(
        &svc,
        Method::POST,
        "/v1/alert-channels",
        &json!({"type": "EMAIL", "config": {"address": "ops@example.com"}, "sendRecovery": false}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let mail: Value = resp.json().await.unwrap();
    assert_eq!(mail["config"]["address"], "ops@example.com");
    assert_eq!(mail["sendRecovery"], false);

    for (body, prefix) in [
        (
            json!({"type": "EMAIL", "config": {"address": "nobody"}}),
            "config.address:",
        ),
        (
            json!({"type": "SLACK", "config": {"url": "file:///x"}}),
            "config.url:",
        ),
        (
            json!({"type": "PAGERDUTY", "config": {}}),
            "config.serviceKey:",
        ),
        (json!({"type": "NOPE", "config": {}}), "type:"),
        (
            json!({"type": "WEBHOOK", "config": {"url": "file:///etc/passwd"}}),
            "config.url:",
        ),
        (json!({"config": {}}), "type:"),
    ] {
        let resp = send(&svc, Method::POST, "/v1/alert-channels", &body).await;
        let message = bad_request(resp).await;
        assert!(message.starts_with(prefix), "{message}");
    }

    let list = get_json(&svc, "/v1/alert-channels").await;
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert_eq!(
        get_json(&svc, &format!("/v1/alert-channels/{hook_id}")).await,
        hook
    );

    // Replacing with the masked secret keeps the secret (the masked value is shown).
    let mut config = hook["config"].clone();
    config["url"] = json!("http://127.0.0.1:10/hook");
    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/alert-channels/{hook_id}"),
        &json!({"type": "WEBHOOK", "config": config}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let replaced: Value = resp.json().await.unwrap();
    assert_eq!(replaced["config"]["url"], "http://127.0.0.1:10/hook");
    assert_eq!(replaced["config"]["webhookSecret"], "*****");
    assert!(replaced["updated_at"].is_string());

    // autoAssignAlerts (default true) subscribes a new check to every channel.
    let auto = create_heartbeat(&svc, heartbeat_body("auto", 60, 0)).await;
    assert_eq!(
        auto["alertChannelSubscriptions"],
        json!([{"alertChannelId": hook_id, "activated": true},
               {"alertChannelId": mail["id"], "activated": true}])
    );
    let resp = svc
        .api(Method::POST, "/v1/checks/heartbeat?autoAssignAlerts=false")
        .json(&heartbeat_body("manual", 60, 0))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let manual: Value = resp.json().await.unwrap();
    assert_eq!(manual["alertChannelSubscriptions"], json!([]));
    let manual_id = manual["id"].as_str().unwrap();

    // PUT .../subscriptions adds one, and the check shows it.
    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/alert-channels/{hook_id}/subscriptions"),
        &json!({"checkId": manual_id, "activated": true}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let sub: Value = resp.json().await.unwrap();
    assert_eq!(sub["checkId"], manual_id);
    assert_eq!(sub["activated"], true);
    assert!(sub["id"].as_i64().unwrap() > 0);
    let shown = get_json(&svc, &format!("/v1/checks/{manual_id}")).await;
    assert_eq!(
        shown["alertChannelSubscriptions"],
        json!([{"alertChannelId": hook_id, "activated": true}])
    );
    let channel = get_json(&svc, &format!("/v1/alert-channels/{hook_id}")).await;
    assert_eq!(channel["subscriptions"].as_array().unwrap().len(), 2);

    let resp = send(
        &svc,
        Method::PUT,
        &format!("/v1/alert-channels/{hook_id}/subscriptions"),
        &json!({"checkId": Uuid::new_v4(), "activated": true}),
    )
    .await;
    error_body(resp, StatusCode::NOT_FOUND).await;

    // Deleting the channel removes its subscriptions.
    let resp = svc
        .api(Method::DELETE, &format!("/v1/alert-channels/{hook_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = svc
        .api(Method::GET, &format!("/v1/alert-channels/{hook_id}"))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    let shown = get_json(&svc, &format!("/v1/checks/{manual_id}")).await;
    assert_eq!(shown["alertChannelSubscriptions"], json!([]));
    let resp = svc
        .api(Method::GET, "/v1/alert-channels/abc")
        .send()
        .await
        .unwrap();
    assert!(bad_request(resp).await.starts_with("id:"));

    // Another account sees none of it, and changes none of it: reading, replacing,
    // deleting or subscribing through the channel is a 404, as for an unknown id, and
    // its own channel cannot subscribe to this account's check.
    let other = svc.other_tenant("elsewhere").await;
    let mail_path = format!("/v1/alert-channels/{}", mail["id"]);
    let before = get_json(&svc, &mail_path).await;
    let replacement = json!({"type": "EMAIL", "config": {"address": "thief@example.com"}});
    let attempts = [
        (Method::GET, mail_path.clone(), None),
        (Method::PUT, mail_path.clone(), Some(replacement.clone())),
        (
            Method::PUT,
            format!("{mail_path}/subscriptions"),
            Some(json!({"checkId": manual_id, "activated": false})),
        ),
        (Method::DELETE, mail_path.clone(), None),
    ];
    // The other account's request: status and JSON body (null when there is none).
    let as_other = |method: Method, path: String, body: Option<Value>| {
        let mut req = svc.api_as(&other, method, &path);
        if let Some(body) = body {
            req = req.json(&body);
        }
        async move {
            let resp = req.send().await.unwrap();
            let status = resp.status();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    for (method, path, body) in attempts {
        let (status, _) = as_other(method.clone(), path.clone(), body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
    }
    let (status, theirs) =
        as_other(Method::POST, "/v1/alert-channels".into(), Some(replacement)).await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    let (status, _) = as_other(
        Method::PUT,
        format!("/v1/alert-channels/{}/subscriptions", theirs["id"]),
        Some(json!({"checkId": manual_id, "activated": true})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, listed) = as_other(Method::GET, "/v1/alert-channels".into(), None).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(get_json(&svc, &mail_path).await, before);
    let shown = get_json(&svc, &format!("/v1/checks/{manual_id}")).await;
    assert_eq!(shown["alertChannelSubscriptions"], json!([]));
    svc.stop().await;
}

fn event(check_id: Uuid, state: HeartbeatState, ts: i64) -> NewEvent {
    NewEvent {
        id: Uuid::new_v4(),
        check_id,
        state,
        ts,
        method: None,
        source: Some("history".into()),
        user_agent: None,
        body: None,
    }
}

/// Batches of any size are stored whole (several statements of bound rows in one
/// transaction beyond the largest statement); events of unknown checks fall out.
#[tokio::test]
async fn event_batches_of_any_size_are_stored_whole() {
    let (svc, _clock) = start_manual().await;
    let created = create_heartbeat(&svc, heartbeat_body("batch", 3600, 600)).await;
    let check: Uuid = id_and_url(&created).0.parse().unwrap();
    let gone = Uuid::new_v4();
    let store = svc.handle.store();
    let mut stored = 0;
    for size in [1usize, 3, 64, 1023, 1024, 1025, 2500] {
        let batch: Vec<NewEvent> = (0..size)
            .map(|i| {
                let owner = if i % 7 == 3 { gone } else { check };
                event(owner, HeartbeatState::Received, T0 + i as i64)
            })
            .collect();
        stored += batch.iter().filter(|e| e.check_id == check).count() as i64;
        store.insert_heartbeat_events(&batch).await.unwrap();
        let counts = store
            .heartbeat_event_counts(check, T0 - 1, T0 + 10_000)
            .await
            .unwrap();
        assert_eq!(counts.total, stored, "after a batch of {size}");
        assert_eq!(counts.successes, stored);
        let none = store
            .heartbeat_event_counts(gone, T0 - 1, T0 + 10_000)
            .await
            .unwrap();
        assert_eq!(none.total, 0);
    }
    svc.stop().await;
}

#[tokio::test]
async fn events_endpoint_defaults_limits_and_exact_stats() {
    use HeartbeatState::*;
    let (svc, clock) = start_manual().await;
    let created = create_heartbeat(&svc, heartbeat_body("history", 3600, 600)).await;
    let (id, _) = id_and_url(&created);
    let check: Uuid = id.parse().unwrap();
    // Constructed history, relative to now = T0 + 30 days.
    let now = T0 + 30 * DAY;
    clock.set(now);
    let history = vec![
        // Current 24 hours: 12 events, 9 in time (3 EARLY, 5 RECEIVED, 1 GRACE).
        event(check, Received, now),
        event(check, Early, now - HOUR),
        event(check, Received, now - 2 * HOUR),
        event(check, Grace, now - 3 * HOUR),
        event(check, Late, now - 4 * HOUR),
        event(check, Failing, now - 5 * HOUR),
        event(check, Received, now - 6 * HOUR),
        event(check, Early, now - 7 * HOUR),
        event(check, Received, now - 8 * HOUR),
        event(check, Failing, now - 9 * HOUR),
        event(check, Early, now - 10 * HOUR),
        event(check, Received, now - DAY + 1),
        // Previous 24 hours: 4 events, 1 in time (the first sits on the boundary).
        event(check, Received, now - DAY),
        event(check, Failing, now - DAY - HOUR),
        event(check, Late, now - DAY - 2 * HOUR),
        event(check, Failing, now - 2 * DAY + 1),
        // Rest of the current 7 days: 4 events, 2 in time.
        event(check, Grace, now - 3 * DAY),
        event(check, Received, now - 5 * DAY),
        event(check, Failing, now - 6 * DAY),
        event(check, Late, now - 7 * DAY + 1),
        // Previous 7 days: 3 events, 3 in time; then one outside every window.
        event(check, Received, now - 7 * DAY),
        event(check, Received, now - 10 * DAY),
        event(check, Early, now - 14 * DAY + 1),
        event(check, Failing, now - 14 * DAY),
        // In the future of the window: never counted.
        event(check, Received, now + 1),
    ];
    svc.handle
        .store()
        .insert_heartbeat_events(&history)
        .await
        .unwrap();

    let item = events(&svc, &id, "").await;
    let listed = item["events"].as_array().unwrap();
    assert_eq!(listed.len(), 10, "default limit is 10");
    assert_eq!(listed[0]["state"], "RECEIVED");
    assert_eq!(
        listed[0]["timestamp"],
        chrono::DateTime::from_timestamp_millis(now)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    );
    assert_eq!(listed[0]["source"], "history");
    assert_eq!(listed[0]["userAgent"], Value::Null);
    assert_eq!(listed[9]["state"], "FAILING");
    let stamps: Vec<&str> = listed
        .iter()
        .map(|e| e["timestamp"].as_str().unwrap())
        .collect();
    let mut sorted = stamps.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(stamps, sorted, "newest first");

    // 12/9, 4/1, 20/12, 3/3 (events/in time) -> exact percentages.
    let stats = &item["stats"];
    assert_eq!(stats["last24Hours"]["totalEntitiesCurrentPeriod"], 12);
    assert_eq!(stats["last24Hours"]["successRatio"]["currentPeriod"], 75.0);
    assert_eq!(stats["last24Hours"]["successRatio"]["previousPeriod"], 25.0);
    assert_eq!(stats["last7Days"]["totalEntitiesCurrentPeriod"], 20);
    assert_eq!(stats["last7Days"]["successRatio"]["currentPeriod"], 60.0);
    assert_eq!(stats["last7Days"]["successRatio"]["previousPeriod"], 100.0);

    // Window and limit.
    let item = events(
        &svc,
        &id,
        &format!("startTime={}&endTime={}&limit=3", now - 2 * DAY, now - DAY),
    )
    .await;
    let states: Vec<&str> = item["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["RECEIVED", "FAILING", "LATE"]);
    let iso = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .unwrap()
            .to_rfc3339()
    };
    let item = events(
        &svc,
        &id,
        &format!(
            "startTime={}&endTime={}",
            urlencode(&iso(now - 8 * DAY)),
            urlencode(&iso(now - 3 * DAY))
        ),
    )
    .await;
    assert_eq!(item["events"].as_array().unwrap().len(), 5);

    for (query, field) in [
        ("limit=11", "limit:"),
        ("limit=0", "limit:"),
        ("startTime=tomorrow", "startTime:"),
        ("startTime=5&endTime=4", "startTime:"),
    ] {
        let resp = svc
            .api(
                Method::GET,
                &format!("/v1/checks/heartbeats/{id}/events?{query}"),
            )
            .send()
            .await
            .unwrap();
        let message = bad_request(resp).await;
        assert!(message.starts_with(field), "{query}: {message}");
    }

    // One event, and the availability of a chosen window (and the one before it).
    let one_id = listed[3]["id"].as_str().unwrap();
    let one = get_json(&svc, &format!("/v1/checks/heartbeats/{id}/events/{one_id}")).await;
    assert_eq!(one["event"], listed[3]);
    assert_eq!(one["stats"], item_stats(&svc, &id).await);
    let resp = svc
        .api(
            Method::GET,
            &format!("/v1/checks/heartbeats/{id}/events/{}", Uuid::new_v4()),
        )
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    let availability = get_json(
        &svc,
        &format!(
            "/v1/checks/heartbeats/{id}/availability?startTime={}&endTime={}",
            now - DAY + 1,
            now
        ),
    )
    .await;
    assert_eq!(
        availability,
        json!({"successRatio": {"previousPeriod": 25.0, "currentPeriod": 75.0},
               "totalEntitiesCurrentPeriod": 12})
    );

    // Not a heartbeat, or not this account's: 404.
    let url_check = svc.create_check(json!({})).await;
    let resp = svc
        .api(
            Method::GET,
            &format!(
                "/v1/checks/heartbeats/{}/events",
                url_check["id"].as_str().unwrap()
            ),
        )
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    let other = svc.other_tenant("elsewhere").await;
    let resp = svc
        .api_as(
            &other,
            Method::GET,
            &format!("/v1/checks/heartbeats/{id}/events"),
        )
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    svc.stop().await;
}

async fn item_stats(svc: &TestService, id: &str) -> Value {
    events(svc, id, "").await["stats"].clone()
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
