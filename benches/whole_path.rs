//! Whole-path URL check benchmark: public API trigger -> scheduler -> agent -> nginx ->
//! result -> session, side by side with prometheus-blackbox-exporter probing the same
//! nginx in the same run. Prints a markdown table for docs/benchmarks.md.
//!
//! cargo bench --bench whole_path -- [--checks 2000] [--rounds 5] [--peer-seconds 10]
//! Needs nginx, prometheus-blackbox-exporter and wrk (Debian packages; scripts/bench installs them).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("stat format")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: f64 = fields.get(11).context("utime")?.parse()?;
    let stime: f64 = fields.get(12).context("stime")?.parse()?;
    Ok((utime + stime) / 100.0)
}

/// A field of /proc/<pid>/status in MB (VmRSS, VmHWM).
fn mem_mb(pid: u32, field: &str) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .context("status field")?;
    let kb: f64 = line.split_whitespace().nth(1).context("value")?.parse()?;
    Ok(kb / 1024.0)
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn spawn(cmd: &mut Command, log: &Path) -> Result<Killed> {
    let f = std::fs::File::create(log)?;
    cmd.stdout(Stdio::from(f.try_clone()?))
        .stderr(Stdio::from(f))
        .stdin(Stdio::null());
    Ok(Killed(
        cmd.spawn().with_context(|| format!("spawning {cmd:?}"))?,
    ))
}

async fn wait_http(url: &str) -> Result<()> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if reqwest::get(url).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("{url} never answered")
}

/// nginx lives in /usr/sbin on Debian, which is not on every PATH.
fn nginx_binary() -> &'static str {
    if Path::new("/usr/sbin/nginx").exists() {
        "/usr/sbin/nginx"
    } else {
        "nginx"
    }
}

fn start_nginx(dir: &Path, port: u16) -> Result<Killed> {
    let www = dir.join("www");
    std::fs::create_dir_all(&www)?;
    std::fs::write(www.join("index.html"), "<html><body>ok</body></html>\n")?;
    std::fs::create_dir_all(dir.join("logs"))?;
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/logs/error.log;\n\
             events {{ worker_connections 4096; }}\n\
             http {{ access_log off; client_body_temp_path {d}; proxy_temp_path {d};\n\
               fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
               server {{ listen 127.0.0.1:{port}; root {w}; }} }}\n",
            d = dir.display(),
            w = www.display()
        ),
    )?;
    spawn(
        Command::new("nginx")
            .arg("-c")
            .arg(&conf)
            .arg("-p")
            .arg(dir),
        &dir.join("nginx.out"),
    )
}

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
        for s in v["sessions"].as_array().context("sessions")? {
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

struct PeerFigures {
    probes_per_sec: f64,
    cpu_ms_per_probe: f64,
    idle_rss_mb: f64,
    peak_rss_mb: f64,
}

async fn run_blackbox(dir: &Path, target: &str, seconds: u64) -> Result<PeerFigures> {
    let port = free_port()?;
    let conf = dir.join("blackbox.yml");
    std::fs::write(
        &conf,
        "modules:\n  http_2xx:\n    prober: http\n    timeout: 5s\n    http:\n      preferred_ip_protocol: ip4\n",
    )?;
    let bb = spawn(
        Command::new("prometheus-blackbox-exporter")
            .arg(format!("--config.file={}", conf.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}")),
        &dir.join("blackbox.log"),
    )?;
    wait_http(&format!("http://127.0.0.1:{port}/")).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_rss_mb = mem_mb(bb.0.id(), "VmRSS:")?;
    let cpu0 = cpu_seconds(bb.0.id())?;
    let url = format!("http://127.0.0.1:{port}/probe?target={target}&module=http_2xx");
    let out = Command::new("wrk")
        .args(["-t2", "-c16", &format!("-d{seconds}s"), &url])
        .output()
        .context("running wrk")?;
    let cpu = cpu_seconds(bb.0.id())? - cpu0;
    let text = String::from_utf8_lossy(&out.stdout);
    let requests: f64 = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next())
        .context("wrk output")?
        .parse()?;
    let secs: f64 = seconds as f64;
    Ok(PeerFigures {
        probes_per_sec: requests / secs,
        cpu_ms_per_probe: cpu * 1000.0 / requests,
        idle_rss_mb,
        peak_rss_mb: mem_mb(bb.0.id(), "VmHWM:")?,
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
    let peer = run_blackbox(&root.join("blackbox"), &target, peer_seconds).await?;

    println!(
        "Whole path, {} URL checks ({checks} checks x {rounds} triggers); peer: blackbox exporter, wrk -t2 -c16 -d{peer_seconds}s\n",
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
