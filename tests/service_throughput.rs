//! Control-plane throughput (ignored by default): trigger N URL checks, lease them with
//! two hand-driven agents and submit PASSED results at once, until every session is
//! final. Measures the service's share of the whole path (no check is executed).
//!
//! CARGO_TARGET_DIR=... cargo test --test service_throughput -- --ignored --nocapture

mod service_support;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use outpost::model::RunStatus;
use outpost::protocol::SubmitStatus;
use reqwest::Method;
use serde_json::{Value, json};
use service_support::{TestAgent, TestService, result_for};

const CHECKS: usize = 2000;
const ROUNDS: usize = 3;

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = after.split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn control_plane_handles_thousands_of_checks_per_second() {
    let svc = TestService::start().await;
    for i in 0..CHECKS {
        let resp = svc
            .api(Method::POST, "/v1/checks/url")
            .json(
                &json!({"name": format!("bench-{i}"), "frequency": 1440, "tags": ["bench"],
                "request": {"url": "http://127.0.0.1:9/"}, "privateLocations": ["local"]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
    }
    for round in 0..ROUNDS {
        let cpu0 = cpu_seconds();
        let start = Instant::now();
        let body: Value = svc
            .api(Method::POST, "/v2/check-sessions/trigger")
            .json(&json!({"target": {"matchTags": [["bench"]]}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let sessions = body["sessions"].as_array().unwrap().len();
        assert_eq!(sessions, CHECKS);
        let triggered = start.elapsed();
        let done = Arc::new(AtomicUsize::new(0));
        let mut agents = Vec::new();
        for _ in 0..2 {
            let agent = TestAgent::new(&svc.http, &svc.base, &svc.tenant.agent_key);
            let done = done.clone();
            agents.push(tokio::spawn(async move {
                let mut seen = HashSet::new();
                while done.load(Ordering::Relaxed) < CHECKS {
                    let jobs = agent.lease(256, 1).await;
                    if jobs.is_empty() {
                        continue;
                    }
                    let results = jobs
                        .iter()
                        .map(|j| result_for(j, RunStatus::Passed))
                        .collect();
                    let out = agent.submit(results).await;
                    for o in &out.outcomes {
                        assert_eq!(o.status, SubmitStatus::Accepted);
                        assert!(seen.insert(o.job_id));
                    }
                    done.fetch_add(out.outcomes.len(), Ordering::Relaxed);
                }
            }));
        }
        for a in agents {
            a.await.unwrap();
        }
        let elapsed = start.elapsed();
        let cpu = cpu_seconds() - cpu0;
        println!(
            "round {round}: {CHECKS} checks in {:.3}s (trigger {:.3}s) = {:.0} checks/s; process CPU {:.2}s",
            elapsed.as_secs_f64(),
            triggered.as_secs_f64(),
            CHECKS as f64 / elapsed.as_secs_f64(),
            cpu
        );
    }
    let (queued, leased) = svc.handle.store().job_counts().await.unwrap();
    assert_eq!((queued, leased), (0, 0));
    svc.stop().await;
}
