//! The heartbeat evaluator on a manual clock: a missed deadline raises one FAILING
//! event and one signed webhook; muted monitors send nothing; a ping recovers with a
//! notice; deactivation and period changes restart the timer; event states; webhook
//! retries; timers and queued notices survive a restart; many staggered deadlines.

mod heartbeat_support;
mod service_support;

use heartbeat_support::*;
use hmac::{Hmac, Mac};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::Sha256;
use uuid::Uuid;

use outpost::service::clock::ManualClock;
use outpost::service::store::NoticeWrite;

fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Checks `x-outpost-signature` of a delivery against `secret`.
fn verify_signature(r: &Received, secret: &str) {
    let header = r
        .headers
        .get("x-outpost-signature")
        .expect("signature header")
        .to_str()
        .unwrap();
    let hex_sig = header.strip_prefix("sha256=").expect("sha256= prefix");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&r.body);
    mac.verify_slice(&hex::decode(hex_sig).unwrap())
        .expect("signature matches the body");
}

#[tokio::test]
async fn missed_deadline_raises_one_failing_event_and_one_signed_webhook() {
    let (svc, clock) = start_manual().await;
    let mut receiver = Receiver::start(&[]).await;
    create_webhook(&svc, &receiver.url, Some("hook-secret")).await;
    let created = create_heartbeat(&svc, heartbeat_body("nightly backup", 60, 30)).await;
    let (id, url) = id_and_url(&created);

    // No ping yet: the timer has not started, nothing alerts however long we wait.
    advance(&svc, &clock, 10 * DAY).await;
    svc.handle.alerts_idle().await;
    receiver.assert_quiet();
    assert_eq!(states(&svc, &id, "").await, Vec::<String>::new());

    let start = clock_now(&clock);
    assert_eq!(ping(&svc, &url, Method::POST).await.0, StatusCode::OK);
    // Exactly at the deadline a ping would still be in time: no alert yet.
    advance(&svc, &clock, 90 * SEC).await;
    svc.handle.alerts_idle().await;
    receiver.assert_quiet();
    // One millisecond later it fails.
    clock.advance(std::time::Duration::from_millis(1));
    let delivery = receiver.next().await;
    verify_signature(&delivery, "hook-secret");
    assert_eq!(
        delivery.headers.get("content-type").unwrap(),
        "application/json"
    );
    let notice = delivery.json();
    assert_eq!(notice["alertType"], "ALERT_FAILURE");
    assert_eq!(notice["checkId"], id.as_str());
    assert_eq!(notice["checkName"], "nightly backup");
    assert_eq!(notice["checkType"], "HEARTBEAT");
    assert_eq!(notice["eventState"], "FAILING");
    assert_eq!(notice["deadlineAt"], iso(start + 90 * SEC));
    assert_eq!(notice["eventAt"], iso(start + 90 * SEC));
    assert_eq!(notice["lastPingAt"], iso(start));
    assert!(
        notice["alertTitle"]
            .as_str()
            .unwrap()
            .contains("nightly backup")
    );

    // However long it stays silent: one alert, one FAILING event (at the deadline).
    advance(&svc, &clock, 3 * DAY).await;
    svc.handle.alerts_idle().await;
    receiver.assert_quiet();
    let item = events(&svc, &id, &format!("startTime={start}")).await;
    let listed = item["events"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{item}");
    assert_eq!(listed[0]["state"], "FAILING");
    assert_eq!(listed[0]["timestamp"], iso(start + 90 * SEC));
    assert_eq!(listed[0]["id"], notice["eventId"]);
    assert_eq!(listed[1]["state"], "RECEIVED");
    svc.stop().await;
}

fn clock_now(clock: &ManualClock) -> i64 {
    use outpost::service::clock::Clock;
    clock.now_ms()
}

#[tokio::test]
async fn a_ping_after_a_failure_recovers_and_sends_a_notice() {
    let (svc, clock) = start_manual().await;
    let mut receiver = Receiver::start(&[]).await;
    create_webhook(&svc, &receiver.url, None).await;
    let (id, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("job", 60, 0)).await);
    ping(&svc, &url, Method::GET).await;
    advance(&svc, &clock, 61 * SEC).await;
    let failure = receiver.next().await;
    assert!(failure.headers.get("x-outpost-signature").is_none());
    assert_eq!(failure.json()["alertType"], "ALERT_FAILURE");

    advance(&svc, &clock, 10 * MIN).await;
    let recovered_at = clock_now(&clock);
    assert_eq!(ping(&svc, &url, Method::GET).await.0, StatusCode::OK);
    let recovery = receiver.next().await.json();
    assert_eq!(recovery["alertType"], "ALERT_RECOVERY");
    assert_eq!(recovery["eventState"], "LATE");
    assert_eq!(recovery["eventAt"], iso(recovered_at));
    assert_eq!(states(&svc, &id, "").await, ["LATE", "FAILING", "RECEIVED"]);

    // The timer runs again from the recovering ping.
    advance(&svc, &clock, 60 * SEC).await;
    svc.handle.alerts_idle().await;
    receiver.assert_quiet();
    advance(&svc, &clock, 1).await;
    assert_eq!(receiver.next().await.json()["alertType"], "ALERT_FAILURE");
    svc.stop().await;
}

#[tokio::test]
async fn muted_monitors_record_failures_but_send_nothing() {
    let (svc, clock) = start_manual().await;
    let mut receiver = Receiver::start(&[]).await;
    create_webhook(&svc, &receiver.url, None).await;
    let mut body = heartbeat_body("quiet", 60, 0);
    body["muted"] = json!(true);
    let (id, url) = id_and_url(&create_heartbeat(&svc, body).await);
    ping(&svc, &url, Method::GET).await;
    advance(&svc, &clock, 61 * SEC).await;
    ping(&svc, &url, Method::GET).await;
    svc.handle.heartbeats_settled().await;
    svc.handle.alerts_idle().await;
    receiver.assert_quiet();
    assert_eq!(states(&svc, &id, "").await, ["LATE", "FAILING", "RECEIVED"]);

    // Unmuted, the same monitor alerts.
    let resp = svc
        .api(Method::PUT, &format!("/v1/checks/heartbeat/{id}"))
        .json(&json!({"muted": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    advance(&svc, &clock, 61 * SEC).await;
    assert_eq!(receiver.next().await.json()["checkId"], id.as_str());
    svc.stop().await;
}

#[tokio::test]
async fn event_states_follow_the_timer() {
    let (svc, clock) = start_manual().await;
    // Period 10 minutes, grace 5: EARLY before 5 minutes, GRACE after 10, LATE after 15.
    let (id, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("states", 600, 300)).await);
    let steps = [0, MIN, 6 * MIN, 12 * MIN, 16 * MIN, 10 * MIN];
    for step in steps {
        advance(&svc, &clock, step).await;
        assert_eq!(ping(&svc, &url, Method::POST).await.0, StatusCode::OK);
    }
    assert_eq!(
        states(&svc, &id, "").await,
        [
            "RECEIVED", "LATE", "FAILING", "GRACE", "RECEIVED", "EARLY", "RECEIVED"
        ]
    );
    svc.stop().await;
}

async fn put_heartbeat(svc: &service_support::TestService, id: &str, body: Value) {
    let resp = svc
        .api(Method::PUT, &format!("/v1/checks/heartbeat/{id}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_period_change_restarts_the_timer() {
    let (svc, clock) = start_manual().await;
    let (id, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("p", 60, 0)).await);
    ping(&svc, &url, Method::GET).await;
    advance(&svc, &clock, 50 * SEC).await;
    let changed_at = clock_now(&clock);
    put_heartbeat(
        &svc,
        &id,
        json!({"heartbeat": {"period": 2, "periodUnit": "minutes", "grace": 0, "graceUnit": "seconds"}}),
    )
    .await;
    // The old deadline (60 s after the ping) passes quietly.
    advance(&svc, &clock, 119 * SEC).await;
    assert_eq!(states(&svc, &id, "").await, ["RECEIVED"]);
    // The new one is 120 s after the change.
    advance(&svc, &clock, SEC + 1).await;
    let item = events(&svc, &id, "").await;
    assert_eq!(item["events"][0]["state"], "FAILING");
    assert_eq!(item["events"][0]["timestamp"], iso(changed_at + 120 * SEC));

    // A change of something else (the grace) keeps the timer where it is.
    ping(&svc, &url, Method::GET).await;
    let pinged_at = clock_now(&clock);
    advance(&svc, &clock, 100 * SEC).await;
    put_heartbeat(
        &svc,
        &id,
        json!({"heartbeat": {"period": 2, "periodUnit": "minutes", "grace": 10, "graceUnit": "seconds"}}),
    )
    .await;
    advance(&svc, &clock, 30 * SEC + 1).await;
    let item = events(&svc, &id, "").await;
    assert_eq!(item["events"][0]["state"], "FAILING");
    assert_eq!(item["events"][0]["timestamp"], iso(pinged_at + 130 * SEC));
    svc.stop().await;
}

#[tokio::test]
async fn deactivation_stops_the_timer_and_reactivation_waits_for_a_ping() {
    let (svc, clock) = start_manual().await;
    let (id, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("d", 60, 0)).await);
    ping(&svc, &url, Method::GET).await;
    advance(&svc, &clock, 30 * SEC).await;
    put_heartbeat(&svc, &id, json!({"activated": false})).await;
    advance(&svc, &clock, DAY).await;
    put_heartbeat(&svc, &id, json!({"activated": true})).await;
    advance(&svc, &clock, DAY).await;
    assert_eq!(states(&svc, &id, "").await, Vec::<String>::new());
    // The first ping after reactivation starts it again.
    ping(&svc, &url, Method::GET).await;
    advance(&svc, &clock, 61 * SEC).await;
    assert_eq!(states(&svc, &id, "").await, ["FAILING", "RECEIVED"]);
    svc.stop().await;
}

#[tokio::test]
async fn webhook_deliveries_are_retried_after_server_errors() {
    let (svc, clock) = start_manual().await;
    let mut receiver = Receiver::start(&[500, 503]).await;
    create_webhook(&svc, &receiver.url, Some("k")).await;
    let (_, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("r", 60, 0)).await);
    ping(&svc, &url, Method::GET).await;
    advance(&svc, &clock, 61 * SEC).await;
    let first = receiver.next().await;
    let second = receiver.next().await;
    let third = receiver.next().await;
    // The same signed body every time.
    assert_eq!(first.body, second.body);
    assert_eq!(second.body, third.body);
    verify_signature(&third, "k");
    svc.handle.alerts_idle().await;
    receiver.assert_quiet();
    svc.stop().await;
}

#[tokio::test]
async fn timers_and_queued_notices_survive_a_restart() {
    let clock = ManualClock::new(T0);
    let mut svc = start_with_clock(&clock, None).await;
    let mut receiver = Receiver::start(&[]).await;
    create_webhook(&svc, &receiver.url, None).await;
    let (id, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("r", 60, 0)).await);
    ping(&svc, &url, Method::GET).await;
    // A second ping moves the running timer; the engine stores only its event, and the
    // restarted engine must find the timer there.
    clock.advance(std::time::Duration::from_secs(10));
    ping(&svc, &url, Method::GET).await;
    let account = svc.tenant.account.id;
    let check: Uuid = id.parse().unwrap();
    // A notice left in the outbox (as a crash before its delivery would leave it).
    let stranded = json!({"alertType": "ALERT_FAILURE", "alertTitle": "left over",
        "accountId": account, "checkId": check, "checkName": "r", "checkType": "HEARTBEAT",
        "tags": [], "eventId": Uuid::new_v4(), "eventState": "FAILING",
        "eventAt": iso(T0), "lastPingAt": null, "deadlineAt": iso(T0)});
    svc.handle
        .store()
        .commit_heartbeats(
            &[],
            &[],
            &[NoticeWrite {
                account_id: account,
                check_id: check,
                notice: stranded,
            }],
        )
        .await
        .unwrap();
    let dir = std::mem::replace(&mut svc.dir, tempfile::tempdir().unwrap());
    svc.stop().await;

    clock.advance(std::time::Duration::from_secs(30));
    let svc = start_with_clock(&clock, Some(dir)).await;
    // The outbox is replayed at start.
    assert_eq!(receiver.next().await.json()["alertTitle"], "left over");
    // The timer restarted by the last ping before the restart still runs.
    advance(&svc, &clock, 30 * SEC).await;
    svc.handle.alerts_idle().await;
    receiver.assert_quiet();
    advance(&svc, &clock, 1).await;
    let notice = receiver.next().await.json();
    assert_eq!(notice["alertType"], "ALERT_FAILURE");
    assert_eq!(notice["deadlineAt"], iso(T0 + 70 * SEC));
    assert_eq!(notice["lastPingAt"], iso(T0 + 10 * SEC));
    svc.stop().await;
}

#[tokio::test]
async fn staggered_deadlines_each_alert_once_at_their_own_time() {
    let (svc, clock) = start_manual().await;
    let mut monitors = Vec::new();
    for i in 0..60i64 {
        let created = create_heartbeat(&svc, heartbeat_body(&format!("m{i}"), 30 + i, i % 7)).await;
        let (id, url) = id_and_url(&created);
        ping(&svc, &url, Method::GET).await;
        monitors.push((id, (30 + i + i % 7) * SEC));
    }
    // Step through time unevenly; every deadline is crossed once.
    for step in [7, 13, 29, 31, 17, 41, 3, 60] {
        advance(&svc, &clock, step * SEC).await;
    }
    for (id, after) in &monitors {
        let item = events(&svc, id, "").await;
        let listed = item["events"].as_array().unwrap();
        assert_eq!(listed.len(), 2, "{id}: {item}");
        assert_eq!(listed[0]["state"], "FAILING");
        assert_eq!(listed[0]["timestamp"], iso(T0 + after), "{id}");
    }
    svc.stop().await;
}

#[tokio::test]
async fn slack_channels_get_a_message_and_hosted_only_types_are_kept_undelivered() {
    let (svc, clock) = start_manual().await;
    let mut receiver = Receiver::start(&[]).await;
    for body in [
        json!({"type": "SLACK", "config": {"url": receiver.url, "channel": "#ops"}}),
        json!({"type": "PAGERDUTY", "config": {"serviceKey": "pd-secret-key"}}),
        json!({"type": "SMS", "config": {"number": "+31612345678", "name": "on call"}}),
    ] {
        let out = create_channel(&svc, &body).await;
        assert!(!out.to_string().contains("pd-secret-key"), "{out}");
    }
    let (_, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("etl", 60, 0)).await);
    assert_eq!(ping(&svc, &url, Method::GET).await.0, StatusCode::OK);
    advance(&svc, &clock, 61 * SEC).await;
    let message = receiver.next().await.json();
    assert_eq!(message["channel"], "#ops");
    assert!(
        message["text"].as_str().unwrap().contains("etl"),
        "{message}"
    );
    // PAGERDUTY and SMS are stored, not delivered: nothing else arrives.
    svc.handle.alerts_idle().await;
    receiver.assert_quiet();
    let list: Value = svc.get_json("/v1/alert-channels").await;
    assert_eq!(list.as_array().unwrap().len(), 3, "{list}");
    assert!(!list.to_string().contains("pd-secret-key"), "{list}");
    svc.stop().await;
}
