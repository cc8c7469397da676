//! End-to-end tests: real `outpost` processes (control plane, agents, `up`) and real
//! loopback targets. Each test owns its temp dir, ports and processes.

mod error_reports;
mod harness;
mod proxy;
#[path = "../proxy_support/mod.rs"]
mod proxy_support;
#[path = "../tls_support/mod.rs"]
mod tls_support;

use std::time::{Duration, Instant};

use harness::{Agent, ControlPlane, Proc, Target, bin, eventually, free_port};
use reqwest::Method;
use serde_json::{Value, json};

fn finals(session: &Value) -> Vec<&Value> {
    session["results"]
        .as_array()
        .map(|r| r.iter().filter(|x| x["resultType"] == "FINAL").collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_checks_pass_and_fail_through_the_whole_path_with_timing_phases() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::start().await;
    let cp = ControlPlane::start(&dir.path().join("data"), free_port(), 15).await;
    let agent = Agent::start(&cp, &dir.path().join("spool"), &[]);
    agent.await_ready().await;

    let ok = cp
        .create_url_check("ok", &target.url("/ok"), json!({}))
        .await;
    let broken = cp
        .create_url_check("broken", &target.url("/status/500"), json!({}))
        .await;
    let sessions = cp.trigger(&[&ok, &broken]).await;
    assert_eq!(sessions.len(), 2);

    for (session_id, check_id, expected) in [
        (&sessions[0], &ok, "PASSED"),
        (&sessions[1], &broken, "FAILED"),
    ] {
        let s = cp.await_session(session_id).await;
        assert_eq!(s["checkId"], check_id.as_str(), "{s}");
        assert_eq!(s["status"], expected, "{s}");
        assert_eq!(s["runLocations"], json!([cp.creds.private_location]));
        let f = finals(&s);
        assert_eq!(f.len(), 1, "exactly one FINAL result: {s}");
        assert_eq!(f[0]["hasFailures"], expected == "FAILED");
        assert_eq!(f[0]["hasErrors"], false);

        let result_id = f[0]["checkResultId"].as_str().unwrap();
        let r: Value = cp
            .json(
                Method::GET,
                &format!("/v1/check-results/{check_id}/{result_id}"),
            )
            .await;
        let phases = &r["timingPhases"];
        for phase in ["dns", "tcp", "tls", "firstByte", "download", "total"] {
            assert!(phases[phase].is_number(), "phase {phase} missing in {r}");
        }
        assert!(phases["total"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            phases["total"].as_f64().unwrap() >= phases["firstByte"].as_f64().unwrap(),
            "{r}"
        );
        assert_eq!(
            phases["tls"].as_f64(),
            Some(0.0),
            "plain HTTP has no TLS phase: {r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_a_job_runs_drains_delivers_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::start().await;
    let cp = ControlPlane::start(&dir.path().join("data"), free_port(), 15).await;
    let mut agent = Agent::start(&cp, &dir.path().join("spool"), &[]);
    agent.await_ready().await;

    let check = cp
        .create_url_check("gated", &target.url("/gate"), json!({}))
        .await;
    let session = cp.trigger(&[&check]).await.remove(0);
    target.arrival().await;

    agent.proc.signal("TERM");
    let signalled = Instant::now();
    eventually("readiness 503 after SIGTERM", || async {
        (agent.probe("/-/readiness").await == Some(503)).then_some(())
    })
    .await;
    assert!(
        signalled.elapsed() < Duration::from_secs(1),
        "readiness took {:?} to turn 503",
        signalled.elapsed()
    );
    assert_eq!(
        agent.probe("/-/liveness").await,
        Some(200),
        "alive while draining"
    );

    target.open(1);
    let s = cp.await_session(&session).await;
    assert_eq!(s["status"], "PASSED", "{s}");
    assert_eq!(finals(&s).len(), 1);
    assert_eq!(
        agent.proc.wait_exit().await,
        Some(0),
        "{}",
        agent.proc.output()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_agent_loses_its_lease_and_the_job_runs_again_once() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::start().await;
    let cp = ControlPlane::start(&dir.path().join("data"), free_port(), 3).await;
    let a = Agent::start(&cp, &dir.path().join("spool-a"), &[]);
    let b = Agent::start(&cp, &dir.path().join("spool-b"), &[]);
    a.await_ready().await;
    b.await_ready().await;

    let check = cp
        .create_url_check("gated", &target.url("/gate"), json!({}))
        .await;
    let session = cp.trigger(&[&check]).await.remove(0);
    target.arrival().await;

    let a_runs_it = eventually("the agent running the job", || async {
        if a.running_jobs().await == Some(1) {
            return Some(true);
        }
        if b.running_jobs().await == Some(1) {
            return Some(false);
        }
        None
    })
    .await;
    let (mut victim, survivor) = if a_runs_it { (a, b) } else { (b, a) };
    victim.proc.signal("KILL");
    victim.proc.wait_exit().await;

    // The lease runs out and the survivor runs the job again.
    target.arrival().await;
    target.open(2);
    let s = cp.await_session(&session).await;
    assert_eq!(s["status"], "PASSED", "{s}");
    assert_eq!(finals(&s).len(), 1, "exactly one FINAL result: {s}");
    assert_eq!(s["results"].as_array().map(Vec::len), Some(1), "{s}");
    drop(survivor);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_survive_a_control_plane_outage_and_an_agent_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let spool = dir.path().join("spool");
    let port = free_port();
    let target = Target::start().await;
    let mut cp = ControlPlane::start(&data, port, 10).await;
    let grace = [("SHUTDOWN_GRACE_SECONDS", "5")];
    let mut agent = Agent::start(&cp, &spool, &grace);
    agent.await_ready().await;

    let mut checks = Vec::new();
    for i in 0..3 {
        checks.push(
            cp.create_url_check(&format!("gated-{i}"), &target.url("/gate"), json!({}))
                .await,
        );
    }
    let ids: Vec<&str> = checks.iter().map(String::as_str).collect();
    let sessions = cp.trigger(&ids).await;
    for _ in 0..3 {
        target.arrival().await;
    }

    // The control plane dies while the results are being produced.
    cp.proc.signal("KILL");
    cp.proc.wait_exit().await;
    target.open(3);
    eventually("three spooled results", || async {
        let n = std::fs::read_dir(&spool)
            .ok()?
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .count();
        (n == 3).then_some(())
    })
    .await;

    // The agent restarts while the control plane is still down.
    agent.proc.signal("TERM");
    assert_eq!(
        agent.proc.wait_exit().await,
        Some(0),
        "{}",
        agent.proc.output()
    );
    let creds = cp.creds.clone();
    drop(cp);
    let agent2 = harness::Agent::start_with_key(port, &creds.agent_key, &spool, &grace);

    let cp = ControlPlane::start(&data, port, 10).await;
    for (session, check) in sessions.iter().zip(&checks) {
        let s = cp.await_session(session).await;
        assert_eq!(s["status"], "PASSED", "{s}");
        assert_eq!(finals(&s).len(), 1, "delivered once: {s}");
        let listed: Value = cp
            .json(Method::GET, &format!("/v1/check-results/{check}"))
            .await;
        assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    }
    eventually("spool drained", || async {
        let n = std::fs::read_dir(&spool)
            .ok()?
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .count();
        (n == 0).then_some(())
    })
    .await;
    drop(agent2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_agent_key_is_refused_and_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(&dir.path().join("data"), free_port(), 15).await;

    let resp = cp
        .http
        .post(cp.url("/agent/v1/hello"))
        .bearer_auth("opa_not-a-real-key")
        .json(&json!({"agentId": uuid::Uuid::new_v4(), "agentVersion": "0", "protocolVersion": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["statusCode"], 401, "{body}");

    let mut agent = Agent::start_with_key(
        cp.port,
        "opa_not-a-real-key",
        &dir.path().join("spool"),
        &[],
    );
    let code = agent.proc.wait_exit().await;
    let out = agent.proc.output();
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}: {out}");
    assert!(out.contains("API_KEY") && out.contains("401"), "{out}");
    assert!(
        !out.contains("opa_not-a-real-key"),
        "the key leaked into the log: {out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_bootstraps_once_runs_checks_and_restarts_on_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let target = Target::start().await;
    let port = free_port();
    let health = free_port();
    let start_up = || {
        let mut cmd = std::process::Command::new(bin());
        cmd.arg("up")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--data-dir")
            .arg(&data)
            .env("AGENT_HEALTH_PORT", health.to_string());
        Proc::spawn(
            cmd,
            dir.path().join(format!("up-{}.log", uuid::Uuid::new_v4())),
        )
    };
    let probe = || async move {
        reqwest::get(format!("http://127.0.0.1:{health}/-/readiness"))
            .await
            .ok()
            .map(|r| r.status().as_u16())
    };

    let mut up = start_up();
    eventually("up's agent ready", || async {
        (probe().await == Some(200)).then_some(())
    })
    .await;
    let creds_text = std::fs::read_to_string(data.join("credentials.json")).unwrap();
    let creds: Value = serde_json::from_str(&creds_text).unwrap();
    for field in [
        "apiUrl",
        "accountId",
        "apiKey",
        "privateLocation",
        "agentKey",
    ] {
        assert!(
            creds[field].as_str().is_some_and(|s| !s.is_empty()),
            "{field} in {creds}"
        );
    }
    let http = reqwest::Client::new();
    let api = |m: Method, path: &str| {
        http.request(m, format!("http://127.0.0.1:{port}{path}"))
            .bearer_auth(creds["apiKey"].as_str().unwrap())
            .header("x-service-account", creds["accountId"].as_str().unwrap())
    };
    let created: Value = api(Method::POST, "/v1/checks/url")
        .json(
            &json!({"name": "up", "frequency": 1440, "privateLocations": [creds["privateLocation"]],
                       "request": {"url": target.url("/ok")}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let check_id = created["id"].as_str().expect("id").to_owned();
    let triggered: Value = api(Method::POST, "/v2/check-sessions/trigger")
        .json(&json!({"target": {"checkId": [check_id]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session = triggered["sessions"][0]["checkSessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let done: Value = eventually("session completes", || async {
        let r = api(
            Method::GET,
            &format!("/v2/check-sessions/{session}/completion?maxWaitSeconds=5"),
        )
        .send()
        .await
        .ok()?;
        if r.status() == 200 {
            r.json().await.ok()
        } else {
            None
        }
    })
    .await;
    assert_eq!(done["status"], "PASSED", "{done}");

    up.signal("TERM");
    assert_eq!(up.wait_exit().await, Some(0), "{}", up.output());

    let mut up = start_up();
    eventually("up ready again", || async {
        (probe().await == Some(200)).then_some(())
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(data.join("credentials.json")).unwrap(),
        creds_text,
        "a second start reuses the credentials"
    );
    let again = api(Method::GET, &format!("/v1/checks/{check_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200, "the check survived the restart");
    up.signal("TERM");
    assert_eq!(up.wait_exit().await, Some(0), "{}", up.output());
}
