//! Credentials of `outpost up`, restarts on the same data directory, and the scheduler
//! driven at chosen times.

mod service_support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use chrono::Utc;
use outpost::service::BoundService;
use outpost::shutdown::Shutdown;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use service_support::{TestAgent, TestOptions, TestService, config};

#[tokio::test]
async fn ensure_credentials_is_idempotent_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let ttl = Duration::from_secs(15);
    let first = BoundService::bind(config(dir.path(), ttl)).await.unwrap();
    let creds = first.ensure_credentials().await.unwrap();
    assert_eq!(creds.private_location, "local");
    assert!(creds.api_key.starts_with("opk_"));
    assert!(creds.agent_key.starts_with("opa_"));
    assert_eq!(creds.api_url, format!("http://{}", first.local_addr()));
    let again = first.ensure_credentials().await.unwrap();
    assert_eq!(again.api_key, creds.api_key);
    let file = dir.path().join("credentials.json");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let on_disk: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(on_disk["accountId"], creds.account_id.as_str());
    assert_eq!(on_disk["agentKey"], creds.agent_key.as_str());
    drop(first);

    let second = BoundService::bind(config(dir.path(), ttl)).await.unwrap();
    let reused = second.ensure_credentials().await.unwrap();
    assert_eq!(reused.account_id, creds.account_id);
    assert_eq!(reused.api_key, creds.api_key);
    assert_eq!(reused.agent_key, creds.agent_key);
    assert_eq!(reused.api_url, format!("http://{}", second.local_addr()));

    // The credentials work against the running service.
    let base = format!("http://{}", second.local_addr());
    let shutdown = Shutdown::new();
    let task = tokio::spawn(second.serve(shutdown.clone()));
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let resp = http
        .get(format!("{base}/v1/checks"))
        .bearer_auth(&reused.api_key)
        .header("x-service-account", &reused.account_id)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let agent = TestAgent::new(&http, &base, &reused.agent_key);
    assert_eq!(agent.hello().await.location_name, "local");
    shutdown.trigger();
    task.await.unwrap().unwrap();

    // A file naming an account that no longer exists is replaced.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(
        other.path().join("credentials.json"),
        std::fs::read(&file).unwrap(),
    )
    .unwrap();
    let third = BoundService::bind(config(other.path(), ttl)).await.unwrap();
    let fresh = third.ensure_credentials().await.unwrap();
    assert_ne!(fresh.account_id, creds.account_id);
}

#[tokio::test]
async fn scheduler_runs_a_sub_minute_check_once_per_slot() {
    let svc = TestService::start_with(TestOptions {
        scheduler: false,
        ..TestOptions::default()
    })
    .await;
    let check = svc
        .create_check(json!({"name": "fast", "frequency": 0, "frequencyOffset": 10}))
        .await;
    svc.create_check(
        json!({"name": "off", "frequency": 0, "frequencyOffset": 10, "activated": false}),
    )
    .await;
    let id: uuid::Uuid = check["id"].as_str().unwrap().parse().unwrap();
    let created = Utc::now();
    let first_run = svc
        .handle
        .store()
        .check_schedule(id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first_run.interval_ms, 10_000);
    assert!(first_run.next_run_at <= created.timestamp_millis() + 10_000);

    let t1 = created + chrono::Duration::milliseconds(10_001);
    assert_eq!(svc.handle.run_scheduler(t1).await.unwrap(), 1);
    assert_eq!(
        svc.handle.run_scheduler(t1).await.unwrap(),
        0,
        "the next run time was moved on"
    );
    let next = svc
        .handle
        .store()
        .check_schedule(id)
        .await
        .unwrap()
        .unwrap();
    assert!(next.next_run_at > t1.timestamp_millis());
    assert_eq!(
        next.next_run_at - first_run.next_run_at,
        10_000,
        "same phase, one interval later"
    );
    let t2 = t1 + chrono::Duration::milliseconds(10_001);
    assert_eq!(svc.handle.run_scheduler(t2).await.unwrap(), 1);

    let agent = svc.agent();
    let jobs = agent.lease(10, 0).await;
    assert_eq!(jobs.len(), 2);
    for job in &jobs {
        assert_eq!(job.check_id, id);
        let s = svc.get_session(&job.session_id.to_string()).await;
        assert_eq!(s["runSource"], "SCHEDULER");
        assert_eq!(s["status"], "STARTED");
    }

    // Deactivating the check removes it from the schedule.
    let resp = svc
        .api(Method::PUT, &format!("/v1/checks/url/{id}"))
        .json(&json!({"activated": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        svc.handle
            .store()
            .check_schedule(id)
            .await
            .unwrap()
            .is_none()
    );
    let t3 = t2 + chrono::Duration::seconds(60);
    assert_eq!(svc.handle.run_scheduler(t3).await.unwrap(), 0);
    svc.stop().await;
}

#[tokio::test]
async fn the_real_scheduler_loop_starts_due_checks() {
    let svc = TestService::start_with(TestOptions {
        scheduler: true,
        ..TestOptions::default()
    })
    .await;
    // Each check's first slot is at most 10 s away (the earliest of five, about 2 s);
    // the long-poll is woken when the scheduler creates the first job.
    for i in 0..5 {
        svc.create_check(
            json!({"name": format!("fast-{i}"), "frequency": 0, "frequencyOffset": 10}),
        )
        .await;
    }
    let agent = svc.agent();
    let jobs = agent.lease(1, 25).await;
    assert_eq!(jobs.len(), 1);
    let s = svc.get_session(&jobs[0].session_id.to_string()).await;
    assert_eq!(s["runSource"], "SCHEDULER");
    svc.stop().await;
}
