//! The whole path of network diagnostics: `outpost serve` and `outpost agent` inside a
//! network namespace made by the test (routed, through a second namespace, to an
//! unreachable TEST-NET-2 address), a URL check of that address triggered through the
//! public API; the agent uploads the packet capture and the traceroute through the
//! agent API and then reports the result, which lists them.
//!
//! The outer test (root) builds the namespaces and runs this test binary's inner test
//! inside the checking namespace, so that its HTTP calls reach the service's loopback.
//! Needs root (prints a SKIP line otherwise).

mod netns_support;
mod require_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use netns_support::{Daemon, EVENT_TIMEOUT, Netns, bin, can_run, link};
use serde_json::{Value, json};

/// Set for the inner test, which does nothing without it.
const INNER_ENV: &str = "OUTPOST_DIAGNOSTICS_E2E_DIR";
const PORT: u16 = 18090;
const TARGET: &str = "198.51.100.7";

#[test]
fn the_agent_uploads_diagnostics_of_a_network_failure_with_its_result() {
    if !can_run("the_agent_uploads_diagnostics_of_a_network_failure_with_its_result") {
        return;
    }
    let (host, router) = (Netns::new(), Netns::new());
    link(&host, "192.0.2.1/24", &router, "192.0.2.2/24");
    host.run(&["ip", "route", "add", "198.51.100.0/24", "via", "192.0.2.2"]);
    router.run(&[
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
        "net.ipv4.icmp_ratelimit=0",
    ]);
    router.run(&["ip", "route", "add", "unreachable", &format!("{TARGET}/32")]);

    let dir = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().unwrap();
    let out = host
        .command(&me.to_string_lossy())
        .args([
            "--exact",
            "inner_run_in_the_namespace",
            "--ignored",
            "--nocapture",
        ])
        .env(INNER_ENV, dir.path())
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the inner test failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the inner test did not run:\n{text}"
    );
}

/// Runs inside the namespace (see the outer test); skipped otherwise.
#[tokio::test]
#[ignore = "run by the_agent_uploads_diagnostics_of_a_network_failure_with_its_result"]
async fn inner_run_in_the_namespace() {
    let Some(dir) = std::env::var_os(INNER_ENV).map(PathBuf::from) else {
        println!("SKIP inner_run_in_the_namespace: only runs inside the outer test");
        return;
    };
    let data = dir.join("data");
    let mut serve = Command::new(bin());
    serve
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{PORT}"),
            "--data-dir",
        ])
        .arg(&data)
        .env("LOG_LEVEL", "INFO");
    let mut service = Daemon::spawn(serve);
    service.wait_for("control plane listening");
    let creds: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("credentials.json")).unwrap())
            .unwrap();
    let text = |k: &str| creds[k].as_str().unwrap().to_owned();

    let mut agent_cmd = Command::new(bin());
    agent_cmd
        .arg("agent")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("API_KEY", text("agentKey"))
        .env("API_URL", format!("http://127.0.0.1:{PORT}"))
        .env("AGENT_HEALTH_PORT", "18091")
        .env("SPOOL_DIR", dir.join("spool"))
        .env("LOG_LEVEL", "DEBUG");
    let mut agent = Daemon::spawn(agent_cmd);
    agent.wait_for("connected to the service");

    let http = reqwest::Client::new();
    let api = |method: reqwest::Method, path: &str| {
        http.request(method, format!("http://127.0.0.1:{PORT}{path}"))
            .bearer_auth(text("apiKey"))
            .header("x-service-account", text("accountId"))
    };
    let created: Value = api(reqwest::Method::POST, "/v1/checks/url")
        .json(&json!({
            "name": "unreachable",
            "activated": true,
            "frequency": 1440,
            "privateLocations": [text("privateLocation")],
            "request": {"url": format!("http://{TARGET}:8080/health")},
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let check_id = created["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"));
    let triggered: Value = api(reqwest::Method::POST, "/v2/check-sessions/trigger")
        .json(&json!({"target": {"checkId": [check_id]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session_id = triggered["sessions"][0]["checkSessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{triggered}"))
        .to_owned();

    // The completion endpoint long-polls: no sleeping here.
    let deadline = Instant::now() + EVENT_TIMEOUT * 2;
    let session: Value = loop {
        let resp = api(
            reqwest::Method::GET,
            &format!("/v2/check-sessions/{session_id}/completion?maxWaitSeconds=5"),
        )
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .unwrap();
        if resp.status() == 200 {
            break resp.json().await.unwrap();
        }
        assert!(Instant::now() < deadline, "the session never completed");
    };
    assert_eq!(session["status"], "FAILED", "{session:#}");
    let result_id = session["results"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["resultType"] == "FINAL"))
        .and_then(|r| r["checkResultId"].as_str())
        .unwrap_or_else(|| panic!("no FINAL result: {session:#}"))
        .to_owned();
    let result: Value = api(
        reqwest::Method::GET,
        &format!("/v1/check-results/{check_id}/{result_id}"),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(result["error"]["kind"], "CONNECT", "{result:#}");
    assert_eq!(result["diagnostics"]["available"], true, "{result:#}");
    let names: Vec<&str> = result["artifacts"]
        .as_array()
        .unwrap_or_else(|| panic!("no artifacts listed: {result:#}"))
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(names, ["capture.pcap", "traceroute.json"], "{result:#}");

    // The service stored both files under DATA_DIR/artifacts/<session>/<job>/.
    let session_dir = data.join("artifacts").join(&session_id);
    for name in names {
        let found = find(&session_dir, name)
            .unwrap_or_else(|| panic!("{name} not stored under {}", session_dir.display()));
        let size = std::fs::metadata(&found).unwrap().len();
        let listed = result["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .and_then(|a| a["size"].as_u64());
        assert_eq!(Some(size), listed, "{name}");
    }
}

/// The first file called `name` under `dir` (one level of job directories).
fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for job in std::fs::read_dir(dir).ok()? {
        let path = job.ok()?.path().join(name);
        if path.is_file() {
            return Some(path);
        }
    }
    None
}
