//! The agent side: leases, long-polls, expiry, renew/release, keys, artifacts, shutdown.

mod service_support;

use std::time::Duration;

use outpost::model::RunStatus;
use outpost::protocol::{SubmitStatus, paths};
use outpost::service::store::StoreError;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use service_support::{TestAgent, TestOptions, TestService, error_body, lease_ref, result_for};

#[tokio::test]
async fn expired_lease_is_requeued_for_another_agent_and_the_old_result_refused() {
    let svc = TestService::start_with(TestOptions {
        lease_ttl: Duration::from_secs(1),
        reaper: true,
        ..TestOptions::default()
    })
    .await;
    let check = svc.create_check(json!({})).await;
    let sid = svc.trigger_one(check["id"].as_str().unwrap()).await;
    let dead = svc.agent();
    let first = dead.lease(1, 0).await;
    assert_eq!(first.len(), 1);
    // The first agent dies. Another one long-polls and is woken by the reaper once the
    // lease expired.
    let heir = svc.agent();
    assert_ne!(heir.id, dead.id);
    let second = heir.lease(1, 20).await;
    assert_eq!(second.len(), 1, "the job came back within the long-poll");
    assert_eq!(second[0].job_id, first[0].job_id);
    assert_ne!(second[0].lease_id, first[0].lease_id);

    let late = dead
        .submit(vec![result_for(&first[0], RunStatus::Passed)])
        .await;
    assert_eq!(late.outcomes[0].status, SubmitStatus::Refused);
    let lost = dead.renew(vec![lease_ref(&first[0])]).await;
    assert_eq!(lost.lost.len(), 1);
    let ok = heir
        .submit(vec![result_for(&second[0], RunStatus::Passed)])
        .await;
    assert_eq!(ok.outcomes[0].status, SubmitStatus::Accepted);
    let again = dead
        .submit(vec![result_for(&first[0], RunStatus::Passed)])
        .await;
    assert_eq!(again.outcomes[0].status, SubmitStatus::Refused);

    let s = svc.get_session(&sid).await;
    assert_eq!(s["status"], "PASSED");
    let results = s["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    let rid = results[0]["checkResultId"].as_str().unwrap();
    let full: Value = svc
        .api(
            Method::GET,
            &format!("/v1/check-results/{}/{rid}", check["id"].as_str().unwrap()),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        full["attempts"], 1,
        "one expiry before the run that counted"
    );
    svc.stop().await;
}

#[tokio::test]
async fn jobs_lost_three_times_time_out_the_session() {
    // The reaper is driven by hand at chosen times: no waiting for real expiries.
    let svc = TestService::start_with(TestOptions {
        reaper: false,
        ..TestOptions::default()
    })
    .await;
    let check = svc.create_check(json!({})).await;
    let sid = svc.trigger_one(check["id"].as_str().unwrap()).await;
    let agent = svc.agent();
    for round in 1..=3 {
        let jobs = agent.lease(1, 0).await;
        assert_eq!(jobs.len(), 1, "round {round}");
        let later = chrono::Utc::now() + chrono::Duration::seconds(60);
        let report = svc.handle.run_reaper(later).await.unwrap();
        if round < 3 {
            assert_eq!((report.requeued, report.timed_out), (1, 0));
        } else {
            assert_eq!((report.requeued, report.timed_out), (0, 1));
        }
    }
    assert!(agent.lease(1, 0).await.is_empty());
    let s = svc.get_session(&sid).await;
    assert_eq!(s["status"], "TIMED_OUT");
    let r = &s["results"][0];
    assert_eq!(r["resultType"], "FINAL");
    assert_eq!(r["hasErrors"], true);
    assert_eq!(r["aborted"], true);

    // A queued job nobody picks up is given up after six minutes.
    let sid = svc.trigger_one(check["id"].as_str().unwrap()).await;
    let soon = chrono::Utc::now() + chrono::Duration::minutes(5);
    assert_eq!(svc.handle.run_reaper(soon).await.unwrap().timed_out, 0);
    let late = chrono::Utc::now() + chrono::Duration::minutes(7);
    assert_eq!(svc.handle.run_reaper(late).await.unwrap().timed_out, 1);
    let s = svc.get_session(&sid).await;
    assert_eq!(s["status"], "TIMED_OUT");
    svc.stop().await;
}

#[tokio::test]
async fn long_poll_wakes_on_new_jobs_and_renew_release_work() {
    let svc = TestService::start().await;
    let check = svc.create_check(json!({})).await;
    let agent = svc.agent();
    let poll = tokio::spawn({
        let agent = TestAgent::new(&agent.http, &agent.base, &agent.key);
        async move { agent.lease(4, 25).await }
    });
    svc.until_long_polls(1).await;
    svc.trigger_ids(&[check["id"].as_str().unwrap()]).await;
    let jobs = poll.await.unwrap();
    assert_eq!(jobs.len(), 1, "the trigger woke the long-poll");
    let job = &jobs[0];

    let renewed = agent.renew(vec![lease_ref(job)]).await;
    assert_eq!(renewed.renewed, vec![lease_ref(job)]);
    assert!(renewed.lost.is_empty());
    assert!(renewed.lease_expires_at >= job.lease_expires_at);

    let released = agent.release(vec![lease_ref(job)]).await;
    assert_eq!(released.released, 1);
    let other = svc.agent();
    let again = other.lease(4, 0).await;
    assert_eq!(again.len(), 1, "a released job is leasable at once");
    assert_eq!(again[0].job_id, job.job_id);
    let stale = agent.renew(vec![lease_ref(job)]).await;
    assert_eq!(stale.lost, vec![lease_ref(job)]);
    assert_eq!(agent.release(vec![lease_ref(job)]).await.released, 0);
    // Zero capacity answers at once, empty.
    assert!(agent.lease(0, 25).await.is_empty());
    svc.stop().await;
}

#[tokio::test]
async fn shutdown_answers_pending_long_polls_with_no_jobs() {
    let svc = TestService::start().await;
    let agent = svc.agent();
    let poll = tokio::spawn(async move { agent.lease(4, 25).await });
    svc.until_long_polls(1).await;
    let started = std::time::Instant::now();
    svc.stop().await;
    let jobs = poll.await.unwrap();
    assert!(jobs.is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the long-poll did not wait out its 25 s"
    );
}

#[tokio::test]
async fn agent_keys_are_checked_and_capped_at_two() {
    let svc = TestService::start().await;
    let store = svc.handle.store();
    let location = svc.tenant.location.id;
    let (second, second_key) = store.create_location_key(location).await.unwrap();
    match store.create_location_key(location).await {
        Err(StoreError::TooManyLocationKeys { max, .. }) => assert_eq!(max, 2),
        other => panic!("expected TooManyLocationKeys, got {other:?}"),
    }
    let rotated = TestAgent::new(&svc.http, &svc.base, &second_key);
    assert_eq!(rotated.hello().await.location_name, "local");
    assert!(
        store
            .revoke_location_key(location, second.id)
            .await
            .unwrap()
    );
    let resp = rotated
        .post(paths::HELLO)
        .json(&json!({"agentId": rotated.id, "agentVersion": "t", "protocolVersion": 1}))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::UNAUTHORIZED).await;
    store.create_location_key(location).await.unwrap();

    for key in ["", "opa_nope", svc.tenant.api_key.as_str()] {
        let resp = svc
            .http
            .post(format!("{}{}", svc.base, paths::LEASE))
            .bearer_auth(key)
            .json(&json!({"agentId": rotated.id, "capacity": {"uptime": 1, "heavy": 0}, "waitSecs": 0}))
            .send()
            .await
            .unwrap();
        error_body(resp, StatusCode::UNAUTHORIZED).await;
    }
    // A malformed agent body is a 400 with the error body, not a 5xx.
    let resp = svc
        .agent()
        .post(paths::RESULTS)
        .header("content-type", "application/json")
        .body("{\"results\": [{\"jobId\": 5}]}")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    svc.stop().await;
}

#[tokio::test]
async fn artifacts_stream_to_disk_with_a_size_cap() {
    let svc = TestService::start_with(TestOptions {
        max_artifact_bytes: 64 * 1024,
        ..TestOptions::default()
    })
    .await;
    let check = svc.create_check(json!({})).await;
    let sid = svc.trigger_one(check["id"].as_str().unwrap()).await;
    let agent = svc.agent();
    let job = agent.lease(1, 0).await.remove(0);
    let url = |name: &str, lease: &str| {
        format!(
            "{}/agent/v1/jobs/{}/artifacts/{name}?leaseId={lease}",
            svc.base, job.job_id
        )
    };
    let lease = job.lease_id.to_string();
    let resp = svc
        .http
        .put(url("shot%20one.png", &lease))
        .bearer_auth(&agent.key)
        .body(vec![7u8; 1000])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["name"], "shot_one.png");
    assert_eq!(body["size"], 1000);
    let stored = svc
        .dir
        .path()
        .join("artifacts")
        .join(&sid)
        .join(job.job_id.to_string())
        .join("shot_one.png");
    assert_eq!(std::fs::read(&stored).unwrap(), vec![7u8; 1000]);

    // Over the cap while streaming (no content-length): 413 and no file left behind.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..20).map(|_| Ok(vec![1u8; 8 * 1024])).collect();
    let resp = svc
        .http
        .put(url("big.bin", &lease))
        .bearer_auth(&agent.key)
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::PAYLOAD_TOO_LARGE).await;
    let dir = stored.parent().unwrap();
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["shot_one.png".to_owned()]);

    // A lease that is not this job's, and a missing lease id.
    let resp = svc
        .http
        .put(url("x.txt", &uuid::Uuid::new_v4().to_string()))
        .bearer_auth(&agent.key)
        .body("x")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    let resp = svc
        .http
        .put(format!(
            "{}/agent/v1/jobs/{}/artifacts/x.txt",
            svc.base, job.job_id
        ))
        .bearer_auth(&agent.key)
        .body("x")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    let rows = svc
        .handle
        .store()
        .session_artifacts(sid.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    svc.stop().await;
}
