//! `outpost agent` against a scripted control plane on 127.0.0.1: key refused, an
//! invalid job reported as an InvalidJob result while polling goes on, readiness,
//! graceful SIGTERM, and the spool across an outage and a restart.

mod agent_support;

use agent_support::{
    AgentProcess, Event, FakeService, LOCATION, ResultsReply, Script, agent_env, bounded, http,
    job, spool_files, until_status,
};
use outpost::agent::scrub::MASK;
use outpost::model::{CheckType, ErrorKind, RunResult, RunStatus};
use outpost::protocol::{MAX_LEASE_WAIT_SECS, SubmittedResult};
use serde_json::json;
use tokio::sync::oneshot;

const KEY: &str = "pl-agent-key-secret-4711";

/// Waits for the first RESULTS request and returns its results.
async fn next_results(service: &mut FakeService) -> Vec<SubmittedResult> {
    loop {
        match service.next_significant().await {
            Event::Results(r) => return r.results,
            Event::Lease { .. } | Event::Hello { .. } => continue,
            other => panic!("unexpected request {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_key_exits_non_zero_with_a_clear_message() {
    let mut service = FakeService::start(Script {
        refuse_key: true,
        ..Script::default()
    })
    .await;
    let spool = tempfile::tempdir().unwrap();
    let url = service.url();
    let mut env = agent_env(KEY, &url, spool.path());
    env.retain(|(k, _)| *k != "LOG_FORMAT");
    let agent = AgentProcess::spawn(&env);

    match service.next().await {
        Event::Hello {
            auth,
            user_agent,
            body,
        } => {
            assert_eq!(auth.as_deref(), Some(format!("Bearer {KEY}").as_str()));
            assert_eq!(
                user_agent.as_deref(),
                Some(format!("outpost-agent/{}", outpost::VERSION).as_str())
            );
            assert_eq!(body.protocol_version, outpost::protocol::PROTOCOL_VERSION);
        }
        other => panic!("expected HELLO, got {other:?}"),
    }
    let (status, stderr) = agent.wait().await;
    let stderr = stderr.join("\n");
    assert!(!status.success(), "{status:?}\n{stderr}");
    assert_ne!(status.code(), Some(2), "2 is for configuration errors");
    assert!(stderr.contains("refused API_KEY"), "{stderr}");
    assert!(!stderr.contains(KEY), "the key leaked: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_job_is_reported_polling_continues_and_sigterm_drains() {
    let bad = job(json!({"checkType": "URL", "name": "no request"}));
    let (deliver, gate) = oneshot::channel();
    let mut service = FakeService::start(Script {
        uptime_jobs: [bad.clone()].into(),
        results: [ResultsReply::AcceptWhen(gate)].into(),
        ..Script::default()
    })
    .await;
    let spool = tempfile::tempdir().unwrap();
    let url = service.url();
    let mut env = agent_env(KEY, &url, spool.path());
    env.push(("UPTIME_CONCURRENCY", "7".into()));
    env.push(("JOB_CONCURRENCY", "2".into()));
    let mut agent = AgentProcess::spawn(&env);
    let health = agent.health_addr().await;
    let base = format!("http://{health}");
    let client = http();

    let agent_id = match service.next().await {
        Event::Hello { body, .. } => body.agent_id,
        other => panic!("expected HELLO, got {other:?}"),
    };
    let started = agent
        .wait_for_log(&format!("Starting Consumer {agent_id}"))
        .await;
    assert_eq!(started["level"], "INFO");
    // One long-poll per pool, each for all of its pool's slots.
    let mut asked = Vec::new();
    let mut results = None;
    let mut next_uptime_lease = false;
    // The invalid job comes back as an InvalidJob result naming the field, and the
    // agent keeps polling while that result is still being delivered.
    while results.is_none() || !next_uptime_lease {
        match service.next_significant().await {
            Event::Results(r) => results = Some(r.results),
            Event::Lease { n, body } => {
                assert_eq!(body.agent_id, agent_id);
                assert_eq!(body.wait_secs, MAX_LEASE_WAIT_SECS);
                let c = (body.capacity.uptime, body.capacity.heavy);
                assert!(c == (7, 0) || c == (0, 2), "{c:?}");
                if n <= 2 {
                    asked.push(c);
                } else {
                    assert_eq!(c, (7, 0), "the invalid job took no slot");
                    next_uptime_lease = true;
                }
            }
            other => panic!("unexpected request {other:?}"),
        }
    }
    asked.sort();
    assert_eq!(asked, [(0, 2), (7, 0)]);
    let results = results.unwrap();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert_eq!((r.job_id, r.lease_id), (bad.job_id, bad.lease_id));
    assert_eq!(r.result.check_type, CheckType::Url);
    assert_eq!(r.result.status, RunStatus::Failed);
    assert!(r.result.has_errors);
    let error = r.result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::InvalidJob);
    assert!(error.message.contains("request"), "{}", error.message);

    until_status(&client, &format!("{base}/-/readiness"), 200).await;
    let live = client
        .get(format!("{base}/-/liveness"))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    let report: serde_json::Value = client
        .get(format!("{base}/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(report["status"], "ok");
    assert_eq!(report["agentId"], agent_id.to_string());
    assert_eq!(report["location"], LOCATION);
    assert_eq!(report["version"], outpost::VERSION);
    assert_eq!(report["runningJobs"], 0);
    assert!(report["lastContactAt"].is_string(), "{report}");
    assert!(report["uptimeSeconds"].is_u64(), "{report}");
    let missing = client.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(missing.status(), 404);

    // SIGTERM while the result is still in flight: readiness turns 503 at once, the
    // process stays up (liveness 200) until the result is delivered, then exits 0.
    agent.terminate();
    until_status(&client, &format!("{base}/-/readiness"), 503).await;
    let live = client
        .get(format!("{base}/-/liveness"))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    deliver.send(()).unwrap();
    let (status, stderr) = agent.wait().await;
    let stderr = stderr.join("\n");
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(KEY), "the key leaked: {stderr}");
    assert!(
        spool_files(spool.path()).is_empty(),
        "a delivered result stays spooled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_survive_an_outage_in_the_spool() {
    let bad = job(json!({"checkType": "NOPE"}));
    let (deliver, gate) = oneshot::channel();
    let mut service = FakeService::start(Script {
        leases: [vec![bad.clone()]].into(),
        results: [ResultsReply::Status(503), ResultsReply::AcceptWhen(gate)].into(),
        ..Script::default()
    })
    .await;
    let spool = tempfile::tempdir().unwrap();
    let url = service.url();
    let agent = AgentProcess::spawn(&agent_env(KEY, &url, spool.path()));

    let first = next_results(&mut service).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].job_id, bad.job_id);
    // Unknown check type: the pool decides the type, the message names checkType.
    assert_eq!(first[0].result.check_type, CheckType::Url);
    let error = first[0].result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::InvalidJob);
    assert!(error.message.contains("checkType"), "{}", error.message);

    // The 503 sends the result to the spool; the retry delivers it from there.
    let second = next_results(&mut service).await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].result, first[0].result);
    assert_eq!(
        spool_files(spool.path()),
        vec![format!("{}_{}.json", bad.job_id, bad.lease_id)],
        "while being retried the result is on disk"
    );
    deliver.send(()).unwrap();
    agent.terminate();
    let (status, stderr) = agent.wait().await;
    assert_eq!(status.code(), Some(0), "{}", stderr.join("\n"));
    assert!(spool_files(spool.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_spooled_by_an_earlier_run_are_delivered_at_start() {
    let spool = tempfile::tempdir().unwrap();
    let earlier = SubmittedResult {
        job_id: uuid::Uuid::new_v4(),
        lease_id: uuid::Uuid::new_v4(),
        result: RunResult::errored(
            CheckType::Url,
            chrono::Utc::now(),
            ErrorKind::Connect,
            "connection refused",
        ),
    };
    let name = format!("{}_{}.json", earlier.job_id, earlier.lease_id);
    std::fs::write(
        spool.path().join(&name),
        serde_json::to_vec(&earlier).unwrap(),
    )
    .unwrap();
    std::fs::write(spool.path().join("0_0.json"), b"not a result").unwrap();

    let mut service = FakeService::start(Script::default()).await;
    let url = service.url();
    let agent = AgentProcess::spawn(&agent_env(KEY, &url, spool.path()));
    let delivered = bounded("the spooled result", next_results(&mut service)).await;
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].job_id, earlier.job_id);
    assert_eq!(delivered[0].result, earlier.result);

    agent.terminate();
    let (status, stderr) = agent.wait().await;
    assert_eq!(status.code(), Some(0), "{}", stderr.join("\n"));
    assert!(
        !spool.path().join(&name).exists(),
        "delivered results leave the spool"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_job_runs_in_its_pool_and_its_result_is_reported() {
    // Nothing listens on port 1: the run fails fast, whatever the executor's details.
    let good = job(json!({"checkType": "URL", "request": {"url": "http://127.0.0.1:1/"}}));
    let mut service = FakeService::start(Script {
        leases: [vec![good.clone()]].into(),
        ..Script::default()
    })
    .await;
    let spool = tempfile::tempdir().unwrap();
    let url = service.url();
    let agent = AgentProcess::spawn(&agent_env(KEY, &url, spool.path()));
    let results = next_results(&mut service).await;
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert_eq!((r.job_id, r.lease_id), (good.job_id, good.lease_id));
    assert_eq!(r.result.check_type, CheckType::Url);
    assert_eq!(r.result.status, RunStatus::Failed);
    assert_ne!(
        r.result.error.as_ref().map(|e| e.kind),
        Some(ErrorKind::InvalidJob)
    );
    agent.terminate();
    let (status, stderr) = agent.wait().await;
    assert_eq!(status.code(), Some(0), "{}", stderr.join("\n"));
}

/// Each pool polls on its own: while the only uptime slot is busy, the agent's long-poll
/// for heavy jobs must not keep the next uptime job waiting once the slot is free (a
/// single lease request for both pools, sent while uptime was full, asked for heavy
/// jobs only and held the agent there for the whole long-poll).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freed_uptime_slot_is_filled_while_heavy_jobs_are_polled() {
    // Nothing listens on port 1: each run fails fast.
    let check = json!({"checkType": "URL", "request": {"url": "http://127.0.0.1:1/"}});
    let (first, second) = (job(check.clone()), job(check));
    let mut service = FakeService::start(Script {
        uptime_jobs: [first.clone(), second.clone()].into(),
        ..Script::default()
    })
    .await;
    let spool = tempfile::tempdir().unwrap();
    let url = service.url();
    let mut env = agent_env(KEY, &url, spool.path());
    env.push(("UPTIME_CONCURRENCY", "1".to_owned()));
    env.push(("JOB_CONCURRENCY", "1".to_owned()));
    let agent = AgentProcess::spawn(&env);
    let mut reported = Vec::new();
    while reported.len() < 2 {
        match service.next_significant().await {
            Event::Results(r) => reported.extend(r.results.iter().map(|r| r.job_id)),
            Event::Lease { body, .. } => {
                let c = body.capacity;
                assert!(
                    (c.uptime == 0) != (c.heavy == 0),
                    "a lease request asks for one pool: {c:?}"
                );
                assert!(c.uptime <= 1 && c.heavy <= 1, "{c:?}");
            }
            Event::Hello { .. } => {}
            other => panic!("unexpected request {other:?}"),
        }
    }
    reported.sort();
    let mut expected = vec![first.job_id, second.job_id];
    expected.sort();
    assert_eq!(reported, expected);
    agent.terminate();
    let (status, stderr) = agent.wait().await;
    assert_eq!(status.code(), Some(0), "{}", stderr.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_the_service_rejects_for_good_is_quarantined() {
    let bad = job(json!({"checkType": "URL"}));
    let mut service = FakeService::start(Script {
        leases: [vec![bad.clone()]].into(),
        results: [ResultsReply::Status(400)].into(),
        ..Script::default()
    })
    .await;
    let spool = tempfile::tempdir().unwrap();
    let url = service.url();
    let agent = AgentProcess::spawn(&agent_env(KEY, &url, spool.path()));
    let results = next_results(&mut service).await;
    assert_eq!(results[0].job_id, bad.job_id);
    agent.terminate();
    let (status, stderr) = agent.wait().await;
    let stderr = stderr.join("\n");
    assert_eq!(status.code(), Some(0), "{stderr}");
    let name = format!("{}_{}.json", bad.job_id, bad.lease_id);
    assert!(
        spool.path().join("quarantine").join(&name).is_file(),
        "{stderr}"
    );
    assert!(spool_files(spool.path()).is_empty(), "never resent");
    assert!(stderr.contains("agent.result.rejected"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let spool = tempfile::tempdir().unwrap();
    let mut env = agent_env(KEY, "http://127.0.0.1:9", spool.path());
    env.retain(|(k, _)| *k != "AGENT_HEALTH_PORT" && *k != "LOG_FORMAT");
    env.push(("AGENT_HEALTH_PORT", port.to_string()));
    let agent = AgentProcess::spawn(&env);
    let (status, stderr) = agent.wait().await;
    let stderr = stderr.join("\n");
    assert!(!status.success());
    assert!(
        stderr.contains(&format!(
            "cannot bind the health server on 127.0.0.1:{port}"
        )),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_traffic_goes_through_http_proxy() {
    // The fake service doubles as the proxy: an absolute-form request still routes by
    // path. The service's own host name does not resolve, so only the proxy can reach it.
    let mut service = FakeService::start(Script {
        refuse_key: true,
        ..Script::default()
    })
    .await;
    let spool = tempfile::tempdir().unwrap();
    let mut env = agent_env(KEY, "http://outpost.invalid:8080", spool.path());
    env.push(("HTTP_PROXY", service.url()));
    let agent = AgentProcess::spawn(&env);
    assert!(matches!(service.next().await, Event::Hello { .. }));
    let (status, stderr) = agent.wait().await;
    assert!(!status.success());
    assert!(stderr.join("\n").contains("refused API_KEY"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_errors_are_reported_through_the_proxy_scrubbed_and_folded() {
    const SECRET: &str = "s3rvice-secret-value";
    const EVENT: &str = "agent.request.rejected";
    // Every LEASE is refused with a message that quotes the key, a secret and a URL: the
    // agent logs the same internal error at each retry.
    let mut service = FakeService::start(Script {
        reject_leases: Some((
            400,
            format!("no lease for {KEY} / {SECRET} at https://leak.example.com/x"),
        )),
        ..Script::default()
    })
    .await;
    let spool = tempfile::tempdir().unwrap();
    // Only the proxy can reach the service: its host name does not resolve.
    let mut env = agent_env(KEY, "http://outpost.invalid:8080", spool.path());
    env.push(("HTTP_PROXY", service.url()));
    env.push(("SERVICE_SECRET_TOKEN", SECRET.to_owned()));
    let mut agent = AgentProcess::spawn(&env);

    let first = service.next_error_reports().await;
    assert_eq!(
        first.auth.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(first.body.agent_version, outpost::VERSION);
    assert_eq!(
        first.body.platform,
        format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
    );
    assert!(first.body.runtime.starts_with("rustc "), "{:?}", first.body);
    assert_eq!(first.body.reports.len(), 1, "{:?}", first.body);
    let report = &first.body.reports[0];
    assert_eq!(report.event, EVENT);
    assert!(report.backtrace.is_none());
    let message = &report.message;
    assert!(message.starts_with("cannot lease jobs: "), "{message}");
    assert!(
        !message.contains(KEY) && !message.contains(SECRET) && !message.contains("leak.example"),
        "{message}"
    );
    assert!(
        message.contains(&format!("no lease for {MASK} / {MASK} at <url>")),
        "{message}"
    );

    // The error repeats; its repeats travel folded into one report, here at shutdown.
    let mut logged = 0;
    while logged < 3 {
        let Some(line) = agent.next_line().await else {
            panic!("the agent ended: {}", agent.stderr.join("\n"));
        };
        if serde_json::from_str::<serde_json::Value>(&line).is_ok_and(|v| v["event"] == EVENT) {
            logged += 1;
        }
    }
    agent.terminate();
    let (status, stderr) = agent.wait().await;
    assert_eq!(status.code(), Some(0), "{}", stderr.join("\n"));
    let occurrences = stderr
        .iter()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| v["event"] == EVENT))
        .count();
    assert!(occurrences >= 3, "{occurrences}");
    let rest = service.next_error_reports().await;
    assert_eq!(rest.body.reports.len(), 1, "{:?}", rest.body);
    assert_eq!(&rest.body.reports[0].message, message);
    assert_eq!(
        (report.count + rest.body.reports[0].count) as usize,
        occurrences,
        "every occurrence counted once"
    );
    assert!(
        service.error_reports.try_recv().is_err(),
        "two requests for {occurrences} occurrences"
    );
    let log = stderr.join("\n");
    assert!(!log.contains(KEY) && !log.contains(SECRET), "{log}");
}
