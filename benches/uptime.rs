//! Uptime executors side by side with prometheus-blackbox-exporter: URL (http), TCP, DNS
//! and ICMP checks against the same local targets in the same run, plus ICMP round trips
//! against iputils ping. Outpost's executors run in this process (the agent's code path
//! without the control plane), 16 at a time; the peer is driven by wrk at 16 connections.
//!
//! cargo bench --bench uptime -- [--checks 20000] [--peer-seconds 5] [--only url|tcp|dns|icmp]
//! Needs nginx, dnsmasq, prometheus-blackbox-exporter, wrk and ping (scripts/bench installs them).
//! `--only TYPE` measures that type alone (and, for icmp, the round trips), starting only
//! the peers it needs.

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use outpost::executors::{ExecEnv, run_check};
use outpost::model::{CheckSpec, RunStatus};
use serde_json::{Value, json};

use support::{Blackbox, Killed, arg, cpu_seconds, free_port, spawn, start_nginx};

/// The peer's modules: the same four probes, IPv4 like our checks.
const BLACKBOX_MODULES: &str = r#"modules:
  http_2xx:
    prober: http
    timeout: 5s
    http:
      preferred_ip_protocol: ip4
  tcp_connect:
    prober: tcp
    timeout: 5s
    tcp:
      preferred_ip_protocol: ip4
  dns:
    prober: dns
    timeout: 5s
    dns:
      query_name: bench.test
      query_type: A
      transport_protocol: udp
      preferred_ip_protocol: ip4
  icmp:
    prober: icmp
    timeout: 5s
    icmp:
      preferred_ip_protocol: ip4
"#;

struct Ours {
    checks_per_sec: f64,
    cpu_ms_per_check: f64,
    passed: usize,
    total: usize,
}

/// Runs `total` checks of `doc`, `concurrency` at a time, and reads this process's CPU.
async fn measure_ours(
    env: &Arc<ExecEnv>,
    doc: &Value,
    total: usize,
    concurrency: usize,
) -> Result<Ours> {
    let spec = Arc::new(CheckSpec::from_document(doc).context("check document")?);
    let me = std::process::id();
    let cpu0 = cpu_seconds(me)?;
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let (env, spec) = (env.clone(), spec.clone());
        let n = total / concurrency + usize::from(worker < total % concurrency);
        tasks.push(tokio::spawn(async move {
            let mut passed = 0usize;
            for _ in 0..n {
                if run_check(&spec, &env).await.status == RunStatus::Passed {
                    passed += 1;
                }
            }
            passed
        }));
    }
    let mut passed = 0;
    for t in tasks {
        passed += t.await?;
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds(me)? - cpu0;
    Ok(Ours {
        checks_per_sec: total as f64 / wall,
        cpu_ms_per_check: cpu * 1000.0 / total as f64,
        passed,
        total,
    })
}

fn start_dnsmasq(dir: &std::path::Path, port: u16) -> Result<Killed> {
    std::fs::create_dir_all(dir)?;
    spawn(
        Command::new(if std::path::Path::new("/usr/sbin/dnsmasq").exists() {
            "/usr/sbin/dnsmasq"
        } else {
            "dnsmasq"
        })
        .args([
            "--keep-in-foreground",
            "--conf-file=/dev/null",
            "--no-resolv",
            "--no-hosts",
            "--bind-interfaces",
            "--listen-address=127.0.0.1",
            "--address=/bench.test/127.0.0.1",
            "--cache-size=0",
        ])
        .arg(format!("--port={port}"))
        .arg(format!("--pid-file={}", dir.join("dnsmasq.pid").display())),
        &dir.join("dnsmasq.log"),
    )
}

/// Median of a slice (sorted copy).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The `--only` type, lower-cased, if given.
fn only() -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.to_ascii_lowercase())
}

/// One iputils ping run: its average RTT in ms (`rtt min/avg/max/mdev = a/b/c/d ms`) and
/// each echo's (`time=0.045 ms`).
fn ping_rtts_ms(count: u32) -> Result<(f64, Vec<f64>)> {
    let out = Command::new("ping")
        .args(["-n", "-c", &count.to_string(), "-i", "0.01", "127.0.0.1"])
        .output()
        .context("running ping")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let each = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect();
    let line = text
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .context("ping summary")?;
    let numbers = line.split('=').nth(1).context("ping numbers")?.trim();
    let avg = numbers.split('/').nth(1).context("avg")?.trim().parse()?;
    Ok((avg, each))
}

/// RTT in ms from one blackbox ICMP probe.
async fn blackbox_icmp_rtt_ms(port: u16) -> Result<f64> {
    let text = reqwest::get(format!(
        "http://127.0.0.1:{port}/probe?target=127.0.0.1&module=icmp"
    ))
    .await?
    .text()
    .await?;
    let line = text
        .lines()
        .find(|l| l.starts_with("probe_icmp_duration_seconds{phase=\"rtt\"}"))
        .context("rtt metric")?;
    let secs: f64 = line.split_whitespace().last().context("value")?.parse()?;
    Ok(secs * 1000.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    if !std::env::args().any(|a| a == "--bench") {
        println!("uptime: run with `cargo bench --bench uptime` (scripts/bench)");
        return Ok(());
    }
    let checks = arg("--checks", 20_000) as usize;
    let peer_seconds = arg("--peer-seconds", 5);
    let only = only();
    if let Some(o) = &only
        && !["url", "tcp", "dns", "icmp"].contains(&o.as_str())
    {
        anyhow::bail!("--only takes url, tcp, dns or icmp, not {o}");
    }
    let wants = |t: &str| only.as_deref().is_none_or(|o| o == t);
    let dir = tempfile::tempdir()?;
    let root = dir.path().to_owned();
    let mut cases: Vec<(&str, Value, &str, String)> = Vec::new();
    let mut _peers = Vec::new();
    if wants("url") || wants("tcp") {
        let nginx_port = free_port()?;
        _peers.push(start_nginx(&root.join("nginx"), nginx_port)?);
        support::wait_http(&format!("http://127.0.0.1:{nginx_port}/")).await?;
        let http_target = format!("http://127.0.0.1:{nginx_port}/index.html");
        if wants("url") {
            cases.push((
                "URL (http)",
                json!({"checkType": "URL", "request": {"url": http_target}}),
                "http_2xx",
                http_target.clone(),
            ));
        }
        if wants("tcp") {
            cases.push((
                "TCP (connect)",
                json!({"checkType": "TCP", "request": {"hostname": "127.0.0.1", "port": nginx_port}}),
                "tcp_connect",
                format!("127.0.0.1:{nginx_port}"),
            ));
        }
    }
    if wants("dns") {
        let dns_port = free_port()?;
        _peers.push(start_dnsmasq(&root.join("dns"), dns_port)?);
        cases.push((
            "DNS (UDP, A)",
            json!({"checkType": "DNS", "request": {"query": "bench.test", "recordType": "A",
                "nameServer": "127.0.0.1", "port": dns_port, "protocol": "UDP"}}),
            "dns",
            format!("127.0.0.1:{dns_port}"),
        ));
    }
    if wants("icmp") {
        cases.push((
            "ICMP (1 echo)",
            json!({"checkType": "ICMP", "request": {"hostname": "127.0.0.1", "pingCount": 1}}),
            "icmp",
            "127.0.0.1".to_owned(),
        ));
    }

    let blackbox = Blackbox::start(&root.join("blackbox"), BLACKBOX_MODULES).await?;
    let env = ExecEnv::from_system().context("exec env")?;

    println!(
        "Uptime executors: {checks} checks per type, 16 at a time, in-process; peer: blackbox exporter driven by wrk -t1 -c16 -d{peer_seconds}s\n"
    );
    println!(
        "| type | outpost checks/s | outpost CPU/check | peer probes/s | peer CPU/probe | checks per CPU-second, outpost / peer |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, doc, module, target) in &cases {
        // ICMP checks are fewer: each waits for a real echo.
        let n = if module == &"icmp" {
            checks / 4
        } else {
            checks
        };
        let ours = match measure_ours(&env, doc, n, 16).await {
            Ok(o) => o,
            Err(e) => {
                println!("| {name} | n/a ({e:#}) | | | | |");
                continue;
            }
        };
        let peer = blackbox.measure(module, target, peer_seconds, 16)?;
        println!(
            "| {name} | {:.0} ({}/{} passed) | {:.3} ms | {:.0} | {:.3} ms | {:.1}x |",
            ours.checks_per_sec,
            ours.passed,
            ours.total,
            ours.cpu_ms_per_check,
            peer.probes_per_sec,
            peer.cpu_ms_per_probe,
            peer.cpu_ms_per_probe / ours.cpu_ms_per_check
        );
    }

    // ICMP round trips: ours vs iputils ping vs the peer, as medians of the per-run
    // averages and of every single echo.
    let rtt_doc =
        json!({"checkType": "ICMP", "request": {"hostname": "127.0.0.1", "pingCount": 20}});
    if wants("icmp")
        && let Ok(spec) = CheckSpec::from_document(&rtt_doc)
    {
        let (mut ours, mut ours_each) = (Vec::new(), Vec::new());
        let (mut pings, mut pings_each) = (Vec::new(), Vec::new());
        let mut peer = Vec::new();
        for _ in 0..5 {
            let r = run_check(&spec, &env).await;
            if let Some(avg) = r.response_time {
                ours.push(avg);
            }
            if let Some(icmp) = &r.icmp {
                ours_each.extend(icmp.rtts.iter().flatten().copied());
            }
            let (avg, each) = ping_rtts_ms(20)?;
            pings.push(avg);
            pings_each.extend(each);
            for _ in 0..4 {
                peer.push(blackbox_icmp_rtt_ms(blackbox.port).await?);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (o, p, b) = (median(&mut ours), median(&mut pings), median(&mut peer));
        let (oe, pe) = (median(&mut ours_each), median(&mut pings_each));
        println!(
            "\nICMP round trip to 127.0.0.1, 5 runs of 20 echoes each (peer: 20 single-echo probes):\n"
        );
        println!("| median of | outpost | iputils ping | blackbox exporter | outpost - ping |");
        println!("|---|---|---|---|---|");
        println!(
            "| run averages | {o:.3} ms | {p:.3} ms | {b:.3} ms (probes) | {:+.3} ms ({:+.1}%) |",
            o - p,
            (o - p) / p * 100.0
        );
        println!(
            "| single echoes ({} / {}) | {oe:.3} ms | {pe:.3} ms | | {:+.3} ms ({:+.1}%) |",
            ours_each.len(),
            pings_each.len(),
            oe - pe,
            (oe - pe) / pe * 100.0
        );
    }
    Ok(())
}
