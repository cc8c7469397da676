//! IPv4 fallback where IPv6 is disabled: the real binary inside a network namespace made
//! by the test, with `lo` up and IPv6 switched off, against an `outpost serve` started in
//! the same namespace (it answers 401 JSON on /v1/checks without credentials).
//!
//! - URL, API and TCP checks that pin no family reach `localhost` over IPv4;
//! - a URL check pinned to IPv6 fails, saying IPv6 is disabled;
//! - an agent whose API_URL host resolves to `::1` first and `127.0.0.1` second reaches
//!   the service.
//!
//! Needs root (prints a SKIP line otherwise).

mod netns_support;
mod require_support;

use std::path::Path;

use netns_support::{Daemon, Netns, bin, can_run};
use serde_json::{Value, json};

/// The port the service listens on inside the namespace (nothing else is there).
const PORT: u16 = 18080;

/// Starts `outpost serve` on 127.0.0.1:PORT inside `ns` and waits until it listens.
fn serve(ns: &Netns, data_dir: &Path) -> Daemon {
    let mut cmd = ns.command(bin());
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{PORT}"),
        "--data-dir",
    ])
    .arg(data_dir)
    .env("LOG_LEVEL", "INFO");
    let mut daemon = Daemon::spawn(cmd);
    daemon.wait_for("control plane listening");
    daemon
}

/// Runs `outpost check` on `doc` inside `ns`; returns the exit code and the result.
fn check(ns: &Netns, dir: &Path, doc: &Value) -> (i32, Value) {
    let file = dir.join(format!("check-{}.json", rand_suffix()));
    std::fs::write(&file, doc.to_string()).unwrap();
    let out = ns
        .command(bin())
        .arg("check")
        .arg(&file)
        .env("LOG_LEVEL", "WARN")
        .env("NETWORK_DIAGNOSTICS", "false")
        .output()
        .unwrap();
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no result ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), result)
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn expect_401() -> Value {
    json!([{"source": "STATUS_CODE", "comparison": "EQUALS", "target": "401"}])
}

#[test]
fn checks_without_a_family_fall_back_to_ipv4_where_ipv6_is_disabled() {
    if !can_run("checks_without_a_family_fall_back_to_ipv4_where_ipv6_is_disabled") {
        return;
    }
    let ns = Netns::new();
    ns.disable_ipv6();
    let dir = tempfile::tempdir().unwrap();
    let _service = serve(&ns, &dir.path().join("data"));
    let url = format!("http://localhost:{PORT}/v1/checks");

    let (code, r) = check(
        &ns,
        dir.path(),
        &json!({"checkType": "URL", "name": "u", "request": {
            "url": url, "assertions": expect_401()}}),
    );
    assert_eq!((code, r["status"].as_str()), (0, Some("PASSED")), "{r:#}");
    assert_eq!(r["response"]["status"], 401, "{r:#}");

    let (code, r) = check(
        &ns,
        dir.path(),
        &json!({"checkType": "API", "name": "a", "shouldFail": true, "request": {
            "method": "GET", "url": url, "assertions": expect_401()}}),
    );
    assert_eq!((code, r["status"].as_str()), (0, Some("PASSED")), "{r:#}");

    let (code, r) = check(
        &ns,
        dir.path(),
        &json!({"checkType": "TCP", "name": "t", "request": {
            "hostname": "localhost", "port": PORT}}),
    );
    assert_eq!((code, r["status"].as_str()), (0, Some("PASSED")), "{r:#}");
    assert_eq!(r["tcp"]["address"], format!("127.0.0.1:{PORT}"), "{r:#}");

    // Pinned to IPv6, the same check fails and says why.
    let (code, r) = check(
        &ns,
        dir.path(),
        &json!({"checkType": "URL", "name": "u6", "request": {
            "url": url, "ipFamily": "IPv6", "assertions": expect_401()}}),
    );
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["error"]["kind"], "CONNECT", "{r:#}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("over IPv6") && message.contains("IPv6 is disabled"),
        "{message}: {r:#}"
    );
    // Pinned to IPv4, it passes.
    let (code, r) = check(
        &ns,
        dir.path(),
        &json!({"checkType": "URL", "name": "u4", "request": {
            "url": url, "ipFamily": "IPv4", "assertions": expect_401()}}),
    );
    assert_eq!(code, 0, "{r:#}");
}

#[test]
fn the_agent_reaches_a_dual_stack_api_url_over_ipv4_where_ipv6_is_disabled() {
    if !can_run("the_agent_reaches_a_dual_stack_api_url_over_ipv4_where_ipv6_is_disabled") {
        return;
    }
    let ns = Netns::new();
    ns.disable_ipv6();
    // localhost resolves to ::1 first, then 127.0.0.1 (what many images ship).
    ns.set_hosts("::1 localhost\n127.0.0.1 localhost\n");
    // glibc puts 127.0.0.1 first here (an unusable ::1 sorts last); hyper-util's own
    // fallback from the first family to the other is tested below with a fixed order.
    let resolved = ns.run(&["getent", "ahosts", "localhost"]);
    let resolved = String::from_utf8_lossy(&resolved.stdout);
    assert!(
        resolved.contains("::1") && resolved.contains("127.0.0.1"),
        "{resolved}"
    );

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let _service = serve(&ns, &data);
    let creds: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("credentials.json")).unwrap())
            .unwrap();
    let agent_key = creds["agentKey"].as_str().unwrap();

    let mut cmd = ns.command(bin());
    cmd.arg("agent")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("API_KEY", agent_key)
        .env("API_URL", format!("http://localhost:{PORT}"))
        .env("AGENT_HEALTH_PORT", "18081")
        .env("SPOOL_DIR", dir.path().join("spool"))
        .env("LOG_LEVEL", "DEBUG");
    let mut agent = Daemon::spawn(cmd);
    let line = agent.wait_for("connected to the service");
    assert!(!line.contains("ERROR"), "{line}");
}

/// What the agent's client relies on: reqwest (hyper-util's connector) tries the next
/// address, of the other family, when the first one fails. Here `::1` comes first and
/// nothing listens there (refused, or unusable where IPv6 is off); 127.0.0.1 answers.
/// Runs without root.
#[tokio::test]
async fn reqwest_tries_ipv4_when_the_first_ipv6_address_fails() {
    use std::net::{Ipv6Addr, SocketAddr};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "over IPv4" }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = reqwest::Client::builder()
        .resolve_to_addrs(
            "dual-stack.test",
            &[
                SocketAddr::from((Ipv6Addr::LOCALHOST, port)),
                SocketAddr::from(([127, 0, 0, 1], port)),
            ],
        )
        .build()
        .unwrap();
    let answer = client
        .get(format!("http://dual-stack.test:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap(), "over IPv4");
}
