//! Check sessions end to end: trigger, lease and submit as an agent, aggregation,
//! completion waits, duplicates, cancel.

mod service_support;

use std::collections::HashSet;

use outpost::model::RunStatus;
use outpost::protocol::SubmitStatus;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use service_support::{TestAgent, TestService, error_body, lease_ref, result_for};

fn ids_of(sessions: &[Value]) -> HashSet<String> {
    sessions
        .iter()
        .map(|s| s["checkId"].as_str().unwrap().to_owned())
        .collect()
}

async fn trigger(svc: &TestService, path: &str, body: Value) -> (StatusCode, Value) {
    let resp = svc
        .api(Method::POST, path)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap())
}

#[tokio::test]
async fn trigger_selects_by_check_id_and_match_tags() {
    let svc = TestService::start().await;
    let id = |v: &Value| v["id"].as_str().unwrap().to_owned();
    let a = id(&svc
        .create_check(json!({"name": "a", "tags": ["a", "b"]}))
        .await);
    let b = id(&svc.create_check(json!({"name": "b", "tags": ["c"]})).await);
    let c = id(&svc
        .create_check(json!({"name": "c", "tags": ["c", "d"]}))
        .await);
    let d = id(&svc
        .create_check(json!({"name": "d", "tags": ["a", "b"], "activated": false}))
        .await);
    let set = |v: &[&String]| v.iter().map(|s| s.to_string()).collect::<HashSet<_>>();

    let (status, body) = trigger(
        &svc,
        "/v2/check-sessions/trigger",
        json!({"target": {"matchTags": [["a", "b"], ["c", "!d"]]}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let sessions = body["sessions"].as_array().unwrap();
    assert_eq!(
        ids_of(sessions),
        set(&[&a, &b]),
        "OR of ANDs, ! negates, deactivated skipped"
    );
    let s = &sessions[0];
    assert_eq!(s["status"], "STARTED");
    assert_eq!(s["runSource"], "TRIGGER_API");
    assert_eq!(s["checkType"], "URL");
    assert_eq!(s["runLocations"], json!(["local"]));
    assert_eq!(s["stoppedAt"], Value::Null);
    assert!(s.get("results").is_none());
    let sid = s["checkSessionId"].as_str().unwrap();
    assert_eq!(
        s["checkSessionLink"],
        format!("{}/v1/check-sessions/{sid}", svc.base)
    );

    let (_, body) = trigger(
        &svc,
        "/v2/check-sessions/trigger",
        json!({"target": {"checkId": [d]}}),
    )
    .await;
    assert_eq!(
        ids_of(body["sessions"].as_array().unwrap()),
        set(&[&d]),
        "a named check runs even when deactivated"
    );

    let (_, body) = trigger(
        &svc,
        "/v1/check-sessions/trigger",
        json!({"target": {"checkId": [b], "matchTags": [["a"]]}}),
    )
    .await;
    assert_eq!(
        ids_of(body["sessions"].as_array().unwrap()),
        set(&[&a, &b]),
        "checkId OR matchTags"
    );

    // No target: every activated check; the v1 body may be empty.
    let resp = svc
        .api(Method::POST, "/v1/check-sessions/trigger")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        ids_of(body["sessions"].as_array().unwrap()),
        set(&[&a, &b, &c])
    );

    let (status, body) = trigger(
        &svc,
        "/v2/check-sessions/trigger",
        json!({"target": {"matchTags": [["nothing"]]}}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["statusCode"], 404);
    assert_eq!(body["error"], "Not Found");
    svc.stop().await;
}

#[tokio::test]
async fn session_passes_with_exactly_one_final_result() {
    let svc = TestService::start().await;
    let check = svc.create_check(json!({"name": "home"})).await;
    let check_id = check["id"].as_str().unwrap();
    let session = &svc.trigger_ids(&[check_id]).await[0];
    let sid = session["checkSessionId"].as_str().unwrap().to_owned();

    let s = svc.get_session(&sid).await;
    assert_eq!(s["status"], "STARTED");
    assert_eq!(s["results"], json!([]));

    let agent = svc.agent();
    let hello = agent.hello().await;
    assert_eq!(hello.location_name, "local");
    let jobs = agent.lease(10, 0).await;
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job.check_id.to_string(), check_id);
    assert_eq!(job.session_id.to_string(), sid);
    assert_eq!(job.run_location, "local");
    let check: serde_json::Value = serde_json::from_str(job.check.get()).unwrap();
    assert_eq!(check["request"]["url"], "http://127.0.0.1:9/");
    assert!(outpost::model::CheckSpec::from_json(job.check.get()).is_ok());
    assert!(
        agent.lease(10, 0).await.is_empty(),
        "a leased job is not leased twice"
    );

    let out = agent.submit(vec![result_for(job, RunStatus::Passed)]).await;
    assert_eq!(out.outcomes.len(), 1);
    assert_eq!(out.outcomes[0].status, SubmitStatus::Accepted);

    let s = svc.get_session(&sid).await;
    assert_eq!(s["status"], "PASSED");
    assert!(s["stoppedAt"].is_string());
    assert!(s["timeElapsed"].as_i64().unwrap() >= 0);
    let results = s["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert_eq!(r["resultType"], "FINAL");
    assert_eq!(r["runLocation"], "local");
    assert_eq!(r["hasFailures"], false);
    assert_eq!(r["hasErrors"], false);
    assert_eq!(r["isCancelled"], false);
    assert_eq!(r["responseTime"], 12.0);
    let rid = r["checkResultId"].as_str().unwrap();
    assert_eq!(
        r["checkResultLink"],
        format!("{}/v1/check-results/{check_id}/{rid}", svc.base)
    );

    // The same session through v2.
    let resp = svc
        .api(Method::GET, &format!("/v2/check-sessions/{sid}"))
        .send()
        .await
        .unwrap();
    let v2: Value = resp.json().await.unwrap();
    assert_eq!(v2["status"], "PASSED");

    // The stored result, with our RunResult fields and the reference ones.
    let resp = svc
        .api(Method::GET, &format!("/v1/check-results/{check_id}/{rid}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let full: Value = resp.json().await.unwrap();
    assert_eq!(full["id"], rid);
    assert_eq!(full["checkId"], check_id);
    assert_eq!(full["resultType"], "FINAL");
    assert_eq!(full["status"], "PASSED");
    assert_eq!(full["overMaxResponseTime"], false);
    assert!(full["startedAt"].is_string());
    assert!(full["created_at"].is_string());
    let list: Vec<Value> = svc
        .api(
            Method::GET,
            &format!("/v1/check-results/{check_id}?limit=5"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], rid);
    svc.stop().await;
}

#[tokio::test]
async fn sessions_aggregate_progress_and_failure_over_locations() {
    let svc = TestService::start().await;
    let (_, second_key) = svc.add_location("second").await;
    let (_, third_key) = svc.add_location("third").await;
    let check = svc
        .create_check(json!({"privateLocations": ["local", "second", "third"]}))
        .await;
    let sid = svc.trigger_one(check["id"].as_str().unwrap()).await;
    let agents = [
        svc.agent(),
        TestAgent::new(&svc.http, &svc.base, &second_key),
        TestAgent::new(&svc.http, &svc.base, &third_key),
    ];
    let mut jobs = Vec::new();
    for a in &agents {
        let mut leased = a.lease(5, 0).await;
        assert_eq!(leased.len(), 1, "each location gets its own job");
        jobs.push(leased.remove(0));
    }
    assert_eq!(jobs[1].run_location, "second");

    let statuses = [
        (RunStatus::Degraded, "PROGRESS_DEGRADED"),
        (RunStatus::Failed, "PROGRESS_FAILED"),
        (RunStatus::Passed, "FAILED"),
    ];
    for (i, (verdict, session_status)) in statuses.iter().enumerate() {
        let out = agents[i].submit(vec![result_for(&jobs[i], *verdict)]).await;
        assert_eq!(out.outcomes[0].status, SubmitStatus::Accepted);
        let s = svc.get_session(&sid).await;
        assert_eq!(s["status"], *session_status);
    }
    let s = svc.get_session(&sid).await;
    assert_eq!(s["results"].as_array().unwrap().len(), 3);
    let runs: HashSet<&str> = s["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runLocation"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ["local", "second", "third"].into_iter().collect());
    svc.stop().await;
}

#[tokio::test]
async fn completion_times_out_then_answers_when_the_result_arrives() {
    let svc = TestService::start().await;
    let check = svc.create_check(json!({})).await;
    let sid = svc.trigger_one(check["id"].as_str().unwrap()).await;
    let resp = svc
        .api(
            Method::GET,
            &format!("/v2/check-sessions/{sid}/completion?maxWaitSeconds=1"),
        )
        .send()
        .await
        .unwrap();
    let err = error_body(resp, StatusCode::REQUEST_TIMEOUT).await;
    assert_eq!(err["error"], "Request Time-out");

    let waiting = svc
        .api(
            Method::GET,
            &format!("/v1/check-sessions/{sid}/completion?maxWaitSeconds=30"),
        )
        .send();
    let waiting = tokio::spawn(waiting);
    svc.until_completion_waits().await;
    let agent = svc.agent();
    let jobs = agent.lease(1, 0).await;
    agent
        .submit(vec![result_for(&jobs[0], RunStatus::Failed)])
        .await;
    let resp = waiting.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let s: Value = resp.json().await.unwrap();
    assert_eq!(s["status"], "FAILED");
    assert_eq!(s["results"].as_array().unwrap().len(), 1);
    assert!(s["stoppedAt"].is_string());
    // A final session answers at once.
    let resp = svc
        .api(Method::GET, &format!("/v2/check-sessions/{sid}/completion"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    svc.stop().await;
}

#[tokio::test]
async fn duplicate_and_foreign_submissions_never_count_twice() {
    let svc = TestService::start().await;
    let c1 = svc.create_check(json!({"name": "one"})).await;
    let c2 = svc.create_check(json!({"name": "two"})).await;
    let sessions = svc
        .trigger_ids(&[c1["id"].as_str().unwrap(), c2["id"].as_str().unwrap()])
        .await;
    let agent = svc.agent();
    let jobs = agent.lease(10, 0).await;
    assert_eq!(jobs.len(), 2);
    let first = result_for(&jobs[0], RunStatus::Passed);
    let out = agent.submit(vec![first.clone()]).await;
    assert_eq!(out.outcomes[0].status, SubmitStatus::Accepted);
    let out = agent.submit(vec![first.clone()]).await;
    assert_eq!(out.outcomes[0].status, SubmitStatus::Duplicate);
    // Same job, a lease it never had.
    let mut forged = first.clone();
    forged.lease_id = uuid::Uuid::new_v4();
    // The second job twice in one batch, plus an unknown job.
    let second = result_for(&jobs[1], RunStatus::Passed);
    let mut unknown = second.clone();
    unknown.job_id = uuid::Uuid::new_v4();
    let out = agent
        .submit(vec![forged, second.clone(), second.clone(), unknown])
        .await;
    let got: Vec<SubmitStatus> = out.outcomes.iter().map(|o| o.status).collect();
    assert_eq!(
        got,
        vec![
            SubmitStatus::Refused,
            SubmitStatus::Accepted,
            SubmitStatus::Duplicate,
            SubmitStatus::Refused
        ]
    );
    // An agent of another account's location cannot submit or see these jobs.
    let other = svc.other_tenant("elsewhere").await;
    let stranger = TestAgent::new(&svc.http, &svc.base, &other.agent_key);
    let out = stranger.submit(vec![first.clone()]).await;
    assert_eq!(out.outcomes[0].status, SubmitStatus::Refused);
    for s in &sessions {
        let s = svc.get_session(s["checkSessionId"].as_str().unwrap()).await;
        assert_eq!(s["status"], "PASSED");
        assert_eq!(s["results"].as_array().unwrap().len(), 1);
    }
    svc.stop().await;
}

#[tokio::test]
async fn cancel_drops_queued_jobs_and_keeps_the_status() {
    let svc = TestService::start().await;
    let (_, second_key) = svc.add_location("second").await;
    let check = svc
        .create_check(json!({"privateLocations": ["local", "second"]}))
        .await;
    let sid = svc.trigger_one(check["id"].as_str().unwrap()).await;
    let agent = svc.agent();
    let jobs = agent.lease(1, 0).await;
    assert_eq!(jobs.len(), 1);

    let resp = svc
        .api(Method::POST, &format!("/v1/check-sessions/{sid}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let s = svc.get_session(&sid).await;
    assert_eq!(s["status"], "CANCELLED");
    assert!(s["stoppedAt"].is_string());
    // Final, but its leased job can still report: not kept as settled.
    assert_eq!(svc.handle.final_sessions_kept(), 0);

    // The queued job of the second location is gone.
    let second = TestAgent::new(&svc.http, &svc.base, &second_key);
    assert!(second.lease(5, 0).await.is_empty());
    // The running job's lease is reported lost, so the agent can abandon it...
    let renewed = agent.renew(vec![lease_ref(&jobs[0])]).await;
    assert!(renewed.renewed.is_empty());
    assert_eq!(renewed.lost, vec![lease_ref(&jobs[0])]);
    // ...and a result that still arrives is recorded without changing the status.
    let out = agent
        .submit(vec![result_for(&jobs[0], RunStatus::Failed)])
        .await;
    assert_eq!(out.outcomes[0].status, SubmitStatus::Accepted);
    let s = svc.get_session(&sid).await;
    assert_eq!(s["status"], "CANCELLED");
    assert_eq!(s["results"].as_array().unwrap().len(), 1);
    // No job left now: settled, kept, and answered with that result.
    assert_eq!(svc.handle.final_sessions_kept(), 1);
    assert_eq!(svc.get_session(&sid).await, s);
    let resp = svc
        .api(Method::GET, &format!("/v2/check-sessions/{sid}/completion"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    // Cancelling again changes nothing.
    let resp = svc
        .api(Method::POST, &format!("/v1/check-sessions/{sid}/cancel"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    svc.stop().await;
}

/// A settled session (final, no job left) is answered from memory: the same answer on
/// every read path, only to its own account, and gone with its check.
#[tokio::test]
async fn settled_sessions_are_kept_until_their_check_is_deleted() {
    let svc = TestService::start().await;
    let check = svc.create_check(json!({"name": "kept"})).await;
    let check_id = check["id"].as_str().unwrap().to_owned();
    let sid = svc.trigger_one(&check_id).await;
    let agent = svc.agent();
    let jobs = agent.lease(1, 0).await;
    assert_eq!(jobs.len(), 1);
    // Not final yet: not kept.
    assert_eq!(svc.get_session(&sid).await["status"], "STARTED");
    assert_eq!(svc.handle.final_sessions_kept(), 0);
    let out = agent
        .submit(vec![result_for(&jobs[0], RunStatus::Degraded)])
        .await;
    assert_eq!(out.outcomes[0].status, SubmitStatus::Accepted);

    let text = |path: String| {
        let svc = &svc;
        async move {
            let resp = svc.api(Method::GET, &path).send().await.unwrap();
            assert_eq!(resp.status(), StatusCode::OK, "{path}");
            assert_eq!(resp.headers()["content-type"], "application/json", "{path}");
            resp.text().await.unwrap()
        }
    };
    let first = text(format!("/v1/check-sessions/{sid}")).await;
    assert_eq!(svc.handle.final_sessions_kept(), 1);
    let v: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["status"], "DEGRADED");
    assert_eq!(v["results"].as_array().unwrap().len(), 1);
    assert_eq!(v["results"][0]["isDegraded"], true);
    for path in [
        format!("/v1/check-sessions/{sid}"),
        format!("/v2/check-sessions/{sid}"),
        format!("/v1/check-sessions/{sid}/completion"),
        format!("/v2/check-sessions/{sid}/completion?maxWaitSeconds=1"),
    ] {
        assert_eq!(text(path).await, first);
    }

    // Another account does not see it.
    let other = svc.other_tenant("elsewhere").await;
    for path in [
        format!("/v1/check-sessions/{sid}"),
        format!("/v1/check-sessions/{sid}/completion"),
    ] {
        let resp = svc.api_as(&other, Method::GET, &path).send().await.unwrap();
        error_body(resp, StatusCode::NOT_FOUND).await;
    }

    // Deleting the check deletes the session: no longer answered.
    let resp = svc
        .api(Method::DELETE, &format!("/v1/checks/{check_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    for path in [
        format!("/v1/check-sessions/{sid}"),
        format!("/v2/check-sessions/{sid}/completion"),
    ] {
        let resp = svc.api(Method::GET, &path).send().await.unwrap();
        error_body(resp, StatusCode::NOT_FOUND).await;
    }
    assert_eq!(svc.handle.final_sessions_kept(), 0);
    svc.stop().await;
}
