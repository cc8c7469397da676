//! Whole-path URL check benchmark: public API trigger -> scheduler -> agent -> nginx ->
//! result -> session, side by side with prometheus-blackbox-exporter probing the same
//! nginx in the same run. Prints a markdown table for docs/benchmarks.md.
//!
//! cargo bench --bench whole_path -- [--checks 2000] [--rounds 5] [--peer-seconds 10]
//! Needs nginx, prometheus-blackbox-exporter and wrk (Debian packages; scripts/bench installs them).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use support::{Blackbox, arg, cpu_seconds, free_port, mem_mb, spawn, start_nginx, wait_http};

struct Figures {
    checks_per_sec: f64,
    cpu_ms_per_check: f64,
    service_cpu_ms_per_check: f64,
    idle_rss_mb: f64,
    peak_rss_mb: f64,
    passed: usize,
    total: usize,
}

async fn run_outpost(dir: &Path, target: &str, checks: u64, rounds: u64) -> Result<Figures> {
    let bin = env!("CARGO_BIN_EXE_outpost");
    let port = free_port()?;
    let data = dir.join("data");
    let serve = spawn(
        Command::new(bin)
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
    let base = format!("http://127.0.0.1:{port}");
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
    let s = |k: &str| creds[k].as_str().unwrap_or_default().to_owned();
    let (key, account, location, agent_key) = (
        s("apiKey"),
        s("accountId"),
        s("privateLocation"),
        s("agentKey"),
    );
    let health = free_port()?;
    let agent = spawn(
        Command::new(bin)
            .arg("agent")
            .env("API_KEY", &agent_key)
            .env("API_URL", &base)
            .env("AGENT_HEALTH_PORT", health.to_string())
            .env("UPTIME_CONCURRENCY", "256")
            .env("SPOOL_DIR", dir.join("spool"))
            .env("LOG_LEVEL", "WARN"),
        &dir.join("agent.log"),
    )?;
    let agent_pid = agent.0.id();
    let http = reqwest::Client::new();
    let api = |m: reqwest::Method, path: &str| {
        http.request(m, format!("{base}{path}"))
            .bearer_auth(&key)
            .header("x-service-account", &account)
    };
    let start = Instant::now();
    loop {
        let ready = reqwest::get(format!("http://127.0.0.1:{health}/-/readiness")).await;
        if ready.is_ok_and(|r| r.status() == 200) {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!("agent never became ready");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..checks {
        let resp = api(reqwest::Method::POST, "/v1/checks/url")
            .json(
                &json!({"name": format!("bench-{i}"), "frequency": 1440, "tags": ["bench"],
                "privateLocations": [location], "degradedResponseTime": 10000,
                "maxResponseTime": 20000,
                "request": {"url": target, "assertions": [
                    {"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"}]}}),
            )
            .send()
            .await?;
        if resp.status() != 201 {
            bail!("creating a check: {} {}", resp.status(), resp.text().await?);
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_rss_mb = mem_mb(agent_pid, "VmRSS:")?;

    let agent_cpu0 = cpu_seconds(agent_pid)?;
    let serve_cpu0 = cpu_seconds(serve.0.id())?;
    let t0 = Instant::now();
    let mut sessions = Vec::new();
    for _ in 0..rounds {
        let v: Value = api(reqwest::Method::POST, "/v2/check-sessions/trigger")
            .json(&json!({"target": {"matchTags": [["bench"]]}}))
            .send()
            .await?
            .json()
            .await?;
        let Some(triggered) = v["sessions"].as_array() else {
            bail!("triggering the checks: {v}");
        };
        for s in triggered {
            sessions.push(s["checkSessionId"].as_str().context("id")?.to_owned());
        }
    }
    let total = sessions.len();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let chunks: Vec<Vec<String>> = sessions
        .chunks(total.div_ceil(8).max(1))
        .map(<[String]>::to_vec)
        .collect();
    for chunk in chunks {
        let tx = tx.clone();
        let http = http.clone();
        let (base, key, account) = (base.clone(), key.clone(), account.clone());
        tokio::spawn(async move {
            for id in chunk {
                loop {
                    let r = http
                        .get(format!(
                            "{base}/v2/check-sessions/{id}/completion?maxWaitSeconds=30"
                        ))
                        .bearer_auth(&key)
                        .header("x-service-account", &account)
                        .send()
                        .await;
                    match r {
                        Ok(r) if r.status() == 200 => {
                            let v: Value = r.json().await.unwrap_or_default();
                            let _ = tx.send(v["status"] == "PASSED");
                            break;
                        }
                        Ok(r) if r.status() == 408 => continue,
                        _ => {
                            let _ = tx.send(false);
                            break;
                        }
                    }
                }
            }
        });
    }
    drop(tx);
    let mut passed = 0;
    while let Some(ok) = rx.recv().await {
        passed += usize::from(ok);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let agent_cpu = cpu_seconds(agent_pid)? - agent_cpu0;
    let serve_cpu = cpu_seconds(serve.0.id())? - serve_cpu0;
    let peak_rss_mb = mem_mb(agent_pid, "VmHWM:")?;
    Ok(Figures {
        checks_per_sec: total as f64 / elapsed,
        cpu_ms_per_check: agent_cpu * 1000.0 / total as f64,
        service_cpu_ms_per_check: serve_cpu * 1000.0 / total as f64,
        idle_rss_mb,
        peak_rss_mb,
        passed,
        total,
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    // `cargo test --all-targets` runs benches without `--bench`: nothing to measure then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("whole_path: run with `cargo bench --bench whole_path` (scripts/bench)");
        return Ok(());
    }
    let checks = arg("--checks", 2000);
    let rounds = arg("--rounds", 5);
    let peer_seconds = arg("--peer-seconds", 10);
    let dir = tempfile::tempdir()?;
    let root: PathBuf = dir.path().to_owned();
    let nginx_port = free_port()?;
    let _nginx = start_nginx(&root.join("nginx"), nginx_port)?;
    let target = format!("http://127.0.0.1:{nginx_port}/index.html");
    wait_http(&target).await?;

    let ours = run_outpost(&root.join("outpost"), &target, checks, rounds).await?;
    let blackbox = Blackbox::start(
        &root.join("blackbox"),
        "modules:\n  http_2xx:\n    prober: http\n    timeout: 5s\n    http:\n      preferred_ip_protocol: ip4\n",
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let peer = blackbox.measure("http_2xx", &target, peer_seconds, 16)?;

    println!(
        "Whole path, {} URL checks ({checks} checks x {rounds} triggers); peer: blackbox exporter, wrk -t1 -c16 -d{peer_seconds}s\n",
        ours.total
    );
    println!("| figure | outpost (whole path) | blackbox exporter (probe only) | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| checks/s | {:.0} | {:.0} | {:.2}x |",
        ours.checks_per_sec,
        peer.probes_per_sec,
        ours.checks_per_sec / peer.probes_per_sec
    );
    println!(
        "| agent CPU per check | {:.3} ms | {:.3} ms | {:.1}x less |",
        ours.cpu_ms_per_check,
        peer.cpu_ms_per_probe,
        peer.cpu_ms_per_probe / ours.cpu_ms_per_check
    );
    println!(
        "| control plane CPU per check | {:.3} ms | - | |",
        ours.service_cpu_ms_per_check
    );
    println!(
        "| resident memory idle | {:.1} MB | {:.1} MB | |",
        ours.idle_rss_mb, peer.idle_rss_mb
    );
    println!(
        "| resident memory peak under load | {:.1} MB | {:.1} MB | |",
        ours.peak_rss_mb, peer.peak_rss_mb
    );
    println!("\nsessions PASSED: {}/{}", ours.passed, ours.total);
    if ours.passed != ours.total {
        bail!("{} sessions did not pass", ours.total - ours.passed);
    }
    Ok(())
}
