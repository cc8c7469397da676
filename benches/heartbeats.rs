//! Heartbeat benchmark (issue 5), against a real `outpost serve` process:
//!
//! (a) durable pings: wrk drives the ping address of `--ping-monitors` monitors (a Lua
//!     script rotates over their URLs); every acknowledged (200) ping must be stored,
//!     so the events are counted in the database afterwards and compared with wrk's
//!     count. In the same run wrk drives nginx answering a fixed `return 200 "OK";`
//!     with the same settings: the ceiling of a tiny HTTP answer on this machine.
//! (b) alert delay: `--monitors` monitors with periods of 30 to 55 s (grace 0), each
//!     pinged once as fast as possible, so their deadlines spread over ~26 s; a webhook
//!     receiver in this process records when each alert arrives; delay = arrival -
//!     deadline (the notice's deadlineAt), p50/p99/max.
//!
//! cargo bench --bench heartbeats -- [--seconds 10] [--connections 64] [--ping-monitors 100]
//!     [--monitors 10000]
//! Needs nginx and wrk (Debian packages; scripts/bench installs them).

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use support::{WrkFigures, arg, free_port, run_wrk, spawn, start_nginx_ok, wait_http};

/// A running `outpost serve` and its API.
struct Outpost {
    proc: support::Killed,
    base: String,
    key: String,
    account: String,
    db: std::path::PathBuf,
    http: reqwest::Client,
}

impl Outpost {
    async fn start(dir: &Path) -> Result<Outpost> {
        let port = free_port()?;
        let data = dir.join("data");
        let proc = spawn(
            Command::new(env!("CARGO_BIN_EXE_outpost"))
                .args([
                    "serve",
                    "--listen",
                    &format!("127.0.0.1:{port}"),
                    "--data-dir",
                ])
                .arg(&data)
                .env("LOG_LEVEL", "WARN"),
            &dir.join("serve.log"),
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
                bail!("no credentials from the control plane");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let base = format!("http://127.0.0.1:{port}");
        wait_http(&format!("{base}/v1/checks")).await?;
        Ok(Outpost {
            proc,
            base,
            key: creds["apiKey"].as_str().unwrap_or_default().to_owned(),
            account: creds["accountId"].as_str().unwrap_or_default().to_owned(),
            db: data.join("outpost.db"),
            http: reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(64)
                .build()?,
        })
    }

    fn api(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .header("x-service-account", &self.account)
    }

    /// Creates heartbeats (period, grace in seconds), `parallel` requests at a time;
    /// returns (id, ping URL) in order.
    async fn create_heartbeats(
        &self,
        specs: &[(u64, u64)],
        parallel: usize,
    ) -> Result<Vec<(String, String)>> {
        use futures_util::StreamExt;
        let made: Vec<Result<(String, String)>> =
            futures_util::stream::iter(specs.iter().enumerate())
                .map(|(i, (period, grace))| async move {
                    let resp = self
                        .api(reqwest::Method::POST, "/v1/checks/heartbeat")
                        .json(&json!({"name": format!("bench {i}"),
                            "heartbeat": {"period": period, "periodUnit": "seconds",
                                          "grace": grace, "graceUnit": "seconds"}}))
                        .send()
                        .await?;
                    if resp.status() != 201 {
                        bail!(
                            "creating a heartbeat: {} {}",
                            resp.status(),
                            resp.text().await?
                        );
                    }
                    let v: Value = resp.json().await?;
                    Ok((
                        v["id"].as_str().context("id")?.to_owned(),
                        v["heartbeat"]["pingUrl"]
                            .as_str()
                            .context("pingUrl")?
                            .to_owned(),
                    ))
                })
                .buffered(parallel)
                .collect()
                .await;
        made.into_iter().collect()
    }

    /// Stored events that are pings (not FAILING), read from the database file.
    async fn stored_pings(&self) -> Result<i64> {
        use sqlx::ConnectOptions;
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&self.db)
            .read_only(true)
            .connect()
            .await?;
        Ok(
            sqlx::query_scalar("SELECT count(*) FROM heartbeat_events WHERE state != 'FAILING'")
                .fetch_one(&mut conn)
                .await?,
        )
    }
}

/// wrk's Lua script rotating over `paths`.
fn rotation_script(dir: &Path, paths: &[String]) -> Result<std::path::PathBuf> {
    let list: Vec<String> = paths.iter().map(|p| format!("\"{p}\"")).collect();
    let script = dir.join("rotate.lua");
    std::fs::write(
        &script,
        format!(
            "local paths = {{ {} }}\nlocal n = 0\nrequest = function()\n  n = n + 1\n  \
             return wrk.format(\"GET\", paths[(n % #paths) + 1])\nend\n",
            list.join(", ")
        ),
    )?;
    Ok(script)
}

/// (a): wrk against the ping address, then against nginx.
async fn pings(
    root: &Path,
    outpost: &Outpost,
    seconds: u64,
    connections: u64,
    monitors: usize,
) -> Result<()> {
    let created = outpost
        .create_heartbeats(&vec![(3600, 0); monitors], 8)
        .await?;
    let paths: Vec<String> = created
        .iter()
        .map(|(_, url)| {
            url::Url::parse(url)
                .map(|u| u.path().to_owned())
                .map_err(anyhow::Error::from)
        })
        .collect::<Result<_>>()?;
    let script = rotation_script(root, &paths)?;
    let script_arg = script.display().to_string();
    let duration = format!("-d{seconds}s");
    let conns = format!("-c{connections}");
    let stored_before = outpost.stored_pings().await?;
    let cpu0 = support::cpu_seconds(outpost.proc.0.id())?;
    let (ours, ours_text) = run_wrk(&["-t1", &conns, &duration, "-s", &script_arg, &outpost.base])?;
    let cpu = support::cpu_seconds(outpost.proc.0.id())? - cpu0;
    let stored = outpost.stored_pings().await? - stored_before;
    let acknowledged = ours.requests - ours.non_2xx;

    let nginx_port = free_port()?;
    let _nginx = start_nginx_ok(&root.join("nginx"), nginx_port)?;
    let nginx_base = format!("http://127.0.0.1:{nginx_port}");
    wait_http(&nginx_base).await?;
    let (nginx, _) = run_wrk(&["-t1", &conns, &duration, "-s", &script_arg, &nginx_base])?;

    println!(
        "\n(a) Durable pings: wrk -t1 {conns} {duration} --latency, GET rotating over {monitors} ping URLs\n"
    );
    println!("| figure | outpost ping address | nginx `return 200` | outpost / nginx |");
    println!("|---|---|---|---|");
    row_rate("requests/s", &ours, &nginx);
    println!(
        "| p50 latency | {:.2} ms | {:.2} ms | |",
        ours.p50_ms, nginx.p50_ms
    );
    println!(
        "| p99 latency | {:.2} ms | {:.2} ms | |",
        ours.p99_ms, nginx.p99_ms
    );
    println!(
        "| control plane CPU per ping | {:.3} ms | | |",
        cpu * 1000.0 / ours.requests.max(1) as f64
    );
    println!(
        "\nacknowledged (200) pings: {acknowledged}; stored: {stored} (the difference, {}, \
         were in flight when wrk stopped); non-2xx: {}; socket errors: {}",
        stored - acknowledged as i64,
        ours.non_2xx,
        ours.socket_errors
    );
    if stored < acknowledged as i64 {
        bail!("LOST PINGS: {acknowledged} acknowledged but {stored} stored\n{ours_text}");
    }
    Ok(())
}

fn row_rate(name: &str, ours: &WrkFigures, nginx: &WrkFigures) {
    println!(
        "| {name} | {:.0} | {:.0} | {:.2} |",
        ours.requests_per_sec,
        nginx.requests_per_sec,
        ours.requests_per_sec / nginx.requests_per_sec
    );
}

/// One webhook as received: arrival (Unix ms) and body.
type Arrival = (i64, bytes::Bytes);

/// A webhook receiver on 127.0.0.1; returns its URL and what it received.
async fn receiver() -> Result<(String, Arc<Mutex<Vec<Arrival>>>, Arc<tokio::sync::Notify>)> {
    let got: Arc<Mutex<Vec<Arrival>>> = Arc::default();
    let notify = Arc::new(tokio::sync::Notify::new());
    let (g, n) = (got.clone(), notify.clone());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: bytes::Bytes| {
            let at = chrono::Utc::now().timestamp_millis();
            let (g, n) = (g.clone(), n.clone());
            async move {
                if let Ok(mut g) = g.lock() {
                    g.push((at, body));
                }
                n.notify_one();
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((url, got, notify))
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// (b): alert delay of many monitors with staggered deadlines.
async fn alert_delays(outpost: &Outpost, monitors: usize) -> Result<()> {
    let (hook_url, got, notify) = receiver().await?;
    let resp = outpost
        .api(reqwest::Method::POST, "/v1/alert-channels")
        .json(&json!({"type": "WEBHOOK", "config": {"name": "bench", "url": hook_url}}))
        .send()
        .await?;
    if resp.status() != 201 {
        bail!("creating the webhook: {}", resp.status());
    }
    let specs: Vec<(u64, u64)> = (0..monitors).map(|i| (30 + (i % 26) as u64, 0)).collect();
    let t = Instant::now();
    let created = outpost.create_heartbeats(&specs, 16).await?;
    let create_secs = t.elapsed().as_secs_f64();

    use futures_util::StreamExt;
    let t = Instant::now();
    let statuses: Vec<Result<reqwest::StatusCode, reqwest::Error>> =
        futures_util::stream::iter(created.iter())
            .map(|(_, url)| async move { outpost.http.get(url).send().await.map(|r| r.status()) })
            .buffer_unordered(32)
            .collect()
            .await;
    let ping_secs = t.elapsed().as_secs_f64();
    let ok = statuses
        .iter()
        .filter(|s| matches!(s, Ok(s) if s.as_u16() == 200))
        .count();
    if ok != monitors {
        bail!("only {ok} of {monitors} first pings answered 200");
    }
    // The last deadline is at most 55 s after the last ping; wait a margin beyond.
    let give_up = Instant::now() + Duration::from_secs(55 + 30);
    loop {
        let n = got.lock().map(|g| g.len()).unwrap_or(0);
        if n >= monitors || Instant::now() > give_up {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), notify.notified()).await;
    }
    let arrivals = got.lock().map(|g| g.clone()).unwrap_or_default();
    let mut delays = Vec::with_capacity(arrivals.len());
    let mut checks = std::collections::HashSet::new();
    let mut deadlines = Vec::with_capacity(arrivals.len());
    for (at, body) in &arrivals {
        let v: Value = serde_json::from_slice(body)?;
        if v["alertType"] != "ALERT_FAILURE" {
            continue;
        }
        let deadline =
            chrono::DateTime::parse_from_rfc3339(v["deadlineAt"].as_str().context("deadlineAt")?)?
                .timestamp_millis();
        deadlines.push(deadline);
        delays.push(at - deadline);
        checks.insert(v["checkId"].as_str().unwrap_or_default().to_owned());
    }
    delays.sort_unstable();
    deadlines.sort_unstable();
    let spread = deadlines.last().copied().unwrap_or(0) - deadlines.first().copied().unwrap_or(0);
    println!(
        "\n(b) Alert delay: {monitors} heartbeat monitors (periods 30-55 s, grace 0), created in \
         {create_secs:.1} s, first pings in {ping_secs:.1} s; deadlines spread over {:.1} s; \
         one webhook channel in this process\n",
        spread as f64 / 1000.0
    );
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| alerts received | {} ({} distinct monitors) |",
        delays.len(),
        checks.len()
    );
    println!(
        "| delay after the deadline, min | {} ms |",
        delays.first().copied().unwrap_or(0)
    );
    println!("| p50 | {} ms |", percentile(&delays, 50.0));
    println!("| p99 | {} ms |", percentile(&delays, 99.0));
    println!("| max | {} ms |", delays.last().copied().unwrap_or(0));
    if checks.len() != monitors || delays.len() != monitors {
        bail!(
            "expected one alert per monitor: {} alerts for {} monitors",
            delays.len(),
            checks.len()
        );
    }
    if delays.first().is_some_and(|d| *d < 0) {
        bail!("an alert arrived before its deadline");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    // `cargo test --all-targets` runs benches without `--bench`: nothing to measure then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("heartbeats: run with `cargo bench --bench heartbeats` (scripts/bench)");
        return Ok(());
    }
    let seconds = arg("--seconds", 10);
    let connections = arg("--connections", 64);
    let ping_monitors = arg("--ping-monitors", 100) as usize;
    let monitors = arg("--monitors", 10_000) as usize;
    let dir = tempfile::tempdir()?;
    let root = dir.path().to_owned();
    let outpost = Outpost::start(&root.join("outpost")).await?;
    pings(&root, &outpost, seconds, connections, ping_monitors).await?;
    alert_delays(&outpost, monitors).await?;
    Ok(())
}
