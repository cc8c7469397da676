//! Status page benchmark (issue 4), against a real `outpost up` process (control plane
//! and agent in one process):
//!
//! A status page of 20 cards with 10 services each; every service has a URL check linked
//! to it (`triggerIncident.serviceId`) that has run once against a local nginx, so every
//! service shows a real state; two incidents with three updates each. wrk then drives
//! `GET /status/<url>` (the HTML page) and `GET /v1/check-sessions/{id}` (JSON, with the
//! API key), and in the same run nginx serving static files of exactly the same bytes
//! (the page and the session as outpost answered them): the ceiling on this machine.
//!
//! cargo bench --bench status_pages -- [--seconds 10] [--connections 64]
//! Needs nginx and wrk (Debian packages; scripts/bench installs them). `OUTPOST_BIN`
//! names another `outpost` binary to measure (e.g. a copy of an earlier build, to
//! compare builds with the same client in alternating runs).

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use support::{WrkFigures, arg, cpu_seconds, free_port, run_wrk, spawn, start_nginx, wait_http};

const CARDS: usize = 20;
const SERVICES_PER_CARD: usize = 10;

/// A running `outpost up` and its API.
struct Outpost {
    proc: support::Killed,
    base: String,
    key: String,
    account: String,
    location: String,
    http: reqwest::Client,
}

impl Outpost {
    async fn start(dir: &Path) -> Result<Outpost> {
        let port = free_port()?;
        let data = dir.join("data");
        let bin =
            std::env::var_os("OUTPOST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_outpost").into());
        let proc = spawn(
            Command::new(bin)
                .args(["up", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
                .arg(&data)
                .env("AGENT_HEALTH_PORT", free_port()?.to_string())
                .env("LOG_LEVEL", "WARN"),
            &dir.join("up.log"),
        )?;
        let creds_path = data.join("credentials.json");
        let start = Instant::now();
        let creds: Value = loop {
            if let Ok(text) = std::fs::read_to_string(&creds_path)
                && let Ok(v) = serde_json::from_str::<Value>(&text)
            {
                break v;
            }
            if start.elapsed() > Duration::from_secs(30) {
                bail!("no credentials from outpost up");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let base = format!("http://127.0.0.1:{port}");
        wait_http(&format!("{base}/v1/checks")).await?;
        let s = |k: &str| creds[k].as_str().unwrap_or_default().to_owned();
        Ok(Outpost {
            proc,
            base,
            key: s("apiKey"),
            account: s("accountId"),
            location: s("privateLocation"),
            http: reqwest::Client::builder().no_proxy().build()?,
        })
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: &Value) -> Result<Value> {
        let resp = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .header("x-service-account", &self.account)
            .json(body)
            .send()
            .await?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            bail!("{path}: {status} {text}");
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn get_text(&self, path: &str, auth: bool) -> Result<String> {
        let mut req = self.http.get(format!("{}{path}", self.base));
        if auth {
            req = req
                .bearer_auth(&self.key)
                .header("x-service-account", &self.account);
        }
        let resp = req.send().await?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            bail!("{path}: {status} {text}");
        }
        Ok(text)
    }
}

/// Builds the page: services, linked checks run once, cards, incidents. Returns the
/// id of one finished check session.
async fn build_page(op: &Outpost, target: &str) -> Result<String> {
    use reqwest::Method;
    let mut services = Vec::new();
    for i in 0..CARDS * SERVICES_PER_CARD {
        let s = op
            .send(
                Method::POST,
                "/v1/status-pages/services",
                &json!({"name": format!("Service {i}")}),
            )
            .await?;
        services.push(s);
    }
    for (i, s) in services.iter().enumerate() {
        op.send(
            Method::POST,
            "/v1/checks/url",
            &json!({"name": format!("check {i}"), "frequency": 1440, "tags": ["bench"],
                "privateLocations": [op.location],
                "triggerIncident": {"serviceId": s["id"], "severity": "MAJOR",
                    "name": "down", "description": "d", "notifySubscribers": false},
                "request": {"url": target, "assertions": [
                    {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"}]}}),
        )
        .await?;
    }
    let triggered = op
        .send(
            Method::POST,
            "/v2/check-sessions/trigger",
            &json!({"target": {"matchTags": [["bench"]]}}),
        )
        .await?;
    let ids: Vec<String> = triggered["sessions"]
        .as_array()
        .context("sessions")?
        .iter()
        .filter_map(|s| s["checkSessionId"].as_str().map(str::to_owned))
        .collect();
    if ids.len() != services.len() {
        bail!("{} sessions for {} checks", ids.len(), services.len());
    }
    for id in &ids {
        op.get_text(
            &format!("/v2/check-sessions/{id}/completion?maxWaitSeconds=30"),
            true,
        )
        .await?;
    }
    let cards: Vec<Value> = services
        .chunks(SERVICES_PER_CARD)
        .enumerate()
        .map(|(c, chunk)| {
            json!({"name": format!("Card {c}"),
                   "services": chunk.iter().map(|s| json!({"id": s["id"]})).collect::<Vec<_>>()})
        })
        .collect();
    op.send(
        Method::POST,
        "/v1/status-pages",
        &json!({"name": "Bench", "url": "bench", "cards": cards}),
    )
    .await?;
    for (n, affected) in [&services[0..3], &services[50..52]].iter().enumerate() {
        let refs: Vec<Value> = affected
            .iter()
            .map(|s| json!({"id": s["id"], "name": s["name"], "accountId": op.account}))
            .collect();
        let incident = op
            .send(
                Method::POST,
                "/v1/status-pages/incidents",
                &json!({"name": format!("Incident {n}"), "severity": "MAJOR", "services": refs,
                    "incidentUpdates": [{"description": "Investigating.", "status": "INVESTIGATING"}]}),
            )
            .await?;
        let id = incident["id"].as_str().context("incident id")?;
        for (status, text) in [("IDENTIFIED", "Found it."), ("MONITORING", "Fixed.")] {
            op.send(
                Method::POST,
                &format!("/v1/status-pages/incidents/{id}/incident-updates"),
                &json!({"description": text, "status": status}),
            )
            .await?;
        }
    }
    ids.into_iter().next().context("no session")
}

/// wrk against `url` (with `headers`); returns its figures and the CPU seconds `pid`
/// spent meanwhile.
fn measure(
    url: &str,
    headers: &[String],
    seconds: u64,
    connections: u64,
    pid: Option<u32>,
) -> Result<(WrkFigures, Option<f64>)> {
    let conns = connections.to_string();
    let dur = format!("{seconds}s");
    let mut args: Vec<&str> = vec!["-t1", "-c", &conns, "-d", &dur];
    for h in headers {
        args.push("-H");
        args.push(h);
    }
    args.push(url);
    // A short warm-up, not measured.
    let mut warm = args.clone();
    warm[4] = "2s";
    run_wrk(&warm)?;
    let cpu0 = pid.map(cpu_seconds).transpose()?;
    let (figures, _) = run_wrk(&args)?;
    let cpu = match (pid, cpu0) {
        (Some(pid), Some(c0)) => Some(cpu_seconds(pid)? - c0),
        _ => None,
    };
    if figures.non_2xx > 0 || figures.socket_errors > 0 {
        bail!(
            "{url}: {} non-2xx, {} socket errors",
            figures.non_2xx,
            figures.socket_errors
        );
    }
    Ok((figures, cpu))
}

#[tokio::main]
async fn main() -> Result<()> {
    // `cargo test --all-targets` runs benches without `--bench`: nothing to measure then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("status_pages: run with `cargo bench --bench status_pages` (scripts/bench)");
        return Ok(());
    }
    let seconds = arg("--seconds", 10);
    let connections = arg("--connections", 64);
    let dir = tempfile::tempdir()?;
    let nginx_dir = dir.path().join("nginx");
    let nginx_port = free_port()?;
    let _nginx = start_nginx(&nginx_dir, nginx_port)?;
    let nginx = format!("http://127.0.0.1:{nginx_port}");
    wait_http(&format!("{nginx}/index.html")).await?;

    let op = Outpost::start(dir.path()).await?;
    let t0 = Instant::now();
    let session = build_page(&op, &format!("{nginx}/index.html")).await?;
    let setup = t0.elapsed().as_secs_f64();

    // nginx serves the very bytes outpost answers.
    let page = op.get_text("/status/bench", false).await?;
    let session_json = op
        .get_text(&format!("/v1/check-sessions/{session}"), true)
        .await?;
    let www = nginx_dir.join("www");
    std::fs::write(www.join("status.html"), &page)?;
    std::fs::write(www.join("session.json"), &session_json)?;
    let operational = page.matches(">Operational<").count();

    let pid = Some(op.proc.0.id());
    let auth = vec![
        format!("Authorization: Bearer {}", op.key),
        format!("x-service-account: {}", op.account),
    ];
    let page_url = format!("{}/status/bench", op.base);
    let session_url = format!("{}/v1/check-sessions/{session}", op.base);
    let (op_page, op_page_cpu) = measure(&page_url, &[], seconds, connections, pid)?;
    let (ng_page, _) = measure(
        &format!("{nginx}/status.html"),
        &[],
        seconds,
        connections,
        None,
    )?;
    let (op_session, op_session_cpu) = measure(&session_url, &auth, seconds, connections, pid)?;
    let (ng_session, _) = measure(
        &format!("{nginx}/session.json"),
        &[],
        seconds,
        connections,
        None,
    )?;

    println!(
        "\nStatus page of {CARDS} cards x {SERVICES_PER_CARD} services ({} bytes, {operational} services operational, 2 incidents), built in {setup:.1} s; check session JSON {} bytes; wrk -t1 -c{connections} -d{seconds}s, nginx (1 worker) serving the same bytes as static files\n",
        page.len(),
        session_json.len()
    );
    println!(
        "| endpoint | outpost requests/s | nginx requests/s | outpost / nginx | outpost p50 | outpost p99 | nginx p99 | outpost CPU per request |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, o, n, cpu) in [
        ("GET /status/bench (HTML)", op_page, ng_page, op_page_cpu),
        (
            "GET /v1/check-sessions/{id}",
            op_session,
            ng_session,
            op_session_cpu,
        ),
    ] {
        let per = cpu.map_or("-".to_owned(), |c| {
            format!("{:.3} ms", c * 1000.0 / o.requests.max(1) as f64)
        });
        println!(
            "| {name} | {:.0} | {:.0} | {:.2} | {:.2} ms | {:.2} ms | {:.2} ms | {per} |",
            o.requests_per_sec,
            n.requests_per_sec,
            o.requests_per_sec / n.requests_per_sec,
            o.p50_ms,
            o.p99_ms,
            n.p99_ms,
        );
    }
    Ok(())
}
