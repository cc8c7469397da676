//! Shared by the benchmarks: processes killed on drop, /proc readings, peers (nginx,
//! prometheus-blackbox-exporter driven by wrk).

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A peer process, stopped when dropped: SIGTERM first (nginx's master then stops its
/// workers; a SIGKILLed master leaves them running, still bound to the port), SIGKILL
/// if it has not exited within five seconds.
pub struct Killed(pub Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let terminated = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if terminated {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// utime + stime of a process, in seconds.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("stat format")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: f64 = fields.get(11).context("utime")?.parse()?;
    let stime: f64 = fields.get(12).context("stime")?.parse()?;
    Ok((utime + stime) / 100.0)
}

/// A field of /proc/<pid>/status in MB (VmRSS, VmHWM).
pub fn mem_mb(pid: u32, field: &str) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .context("status field")?;
    let kb: f64 = line.split_whitespace().nth(1).context("value")?.parse()?;
    Ok(kb / 1024.0)
}

pub fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn spawn(cmd: &mut Command, log: &Path) -> Result<Killed> {
    if let Some(parent) = log.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let f = std::fs::File::create(log)?;
    cmd.stdout(Stdio::from(f.try_clone()?))
        .stderr(Stdio::from(f))
        .stdin(Stdio::null());
    Ok(Killed(
        cmd.spawn().with_context(|| format!("spawning {cmd:?}"))?,
    ))
}

pub async fn wait_http(url: &str) -> Result<()> {
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
pub fn nginx_binary() -> &'static str {
    if Path::new("/usr/sbin/nginx").exists() {
        "/usr/sbin/nginx"
    } else {
        "nginx"
    }
}

pub fn start_nginx(dir: &Path, port: u16) -> Result<Killed> {
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
        Command::new(nginx_binary())
            .arg("-c")
            .arg(&conf)
            .arg("-p")
            .arg(dir),
        &dir.join("nginx.out"),
    )
}

/// What the peer spent on one module: probes/s and CPU per probe, driven by wrk.
pub struct ProbeFigures {
    pub probes_per_sec: f64,
    pub cpu_ms_per_probe: f64,
    pub idle_rss_mb: f64,
    pub peak_rss_mb: f64,
}

/// A running prometheus-blackbox-exporter with the given modules YAML.
pub struct Blackbox {
    pub proc: Killed,
    pub port: u16,
}

impl Blackbox {
    pub async fn start(dir: &Path, modules_yaml: &str) -> Result<Blackbox> {
        let port = free_port()?;
        std::fs::create_dir_all(dir)?;
        let conf = dir.join("blackbox.yml");
        std::fs::write(&conf, modules_yaml)?;
        let proc = spawn(
            Command::new("prometheus-blackbox-exporter")
                .arg(format!("--config.file={}", conf.display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}")),
            &dir.join("blackbox.log"),
        )?;
        wait_http(&format!("http://127.0.0.1:{port}/")).await?;
        Ok(Blackbox { proc, port })
    }

    pub fn pid(&self) -> u32 {
        self.proc.0.id()
    }

    /// Drives `/probe?module=..&target=..` with wrk for `seconds` at `connections`.
    pub fn measure(
        &self,
        module: &str,
        target: &str,
        seconds: u64,
        connections: u32,
    ) -> Result<ProbeFigures> {
        let idle_rss_mb = mem_mb(self.pid(), "VmRSS:")?;
        let cpu0 = cpu_seconds(self.pid())?;
        let url = format!(
            "http://127.0.0.1:{}/probe?target={target}&module={module}",
            self.port
        );
        let out = Command::new("wrk")
            .args([
                "-t1",
                &format!("-c{connections}"),
                &format!("-d{seconds}s"),
                &url,
            ])
            .output()
            .context("running wrk")?;
        let cpu = cpu_seconds(self.pid())? - cpu0;
        let text = String::from_utf8_lossy(&out.stdout);
        let requests: f64 = text
            .lines()
            .find(|l| l.contains(" requests in "))
            .and_then(|l| l.split_whitespace().next())
            .context("wrk output")?
            .parse()?;
        Ok(ProbeFigures {
            probes_per_sec: requests / seconds as f64,
            cpu_ms_per_probe: cpu * 1000.0 / requests,
            idle_rss_mb,
            peak_rss_mb: mem_mb(self.pid(), "VmHWM:")?,
        })
    }
}

/// nginx answering every request with a fixed `200 OK` (`return 200 "OK";`): the ceiling
/// of a tiny HTTP answer on this machine.
pub fn start_nginx_ok(dir: &Path, port: u16) -> Result<Killed> {
    std::fs::create_dir_all(dir.join("logs"))?;
    let conf = dir.join("nginx-ok.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/logs/error.log;\n\
             events {{ worker_connections 4096; }}\n\
             http {{ access_log off; client_body_temp_path {d}; proxy_temp_path {d};\n\
               fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
               server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"OK\"; }} }} }}\n",
            d = dir.display(),
        ),
    )?;
    spawn(
        Command::new(nginx_binary())
            .arg("-c")
            .arg(&conf)
            .arg("-p")
            .arg(dir),
        &dir.join("nginx.out"),
    )
}

/// What wrk reported.
#[derive(Debug, Clone, Copy)]
pub struct WrkFigures {
    /// Responses received.
    pub requests: u64,
    /// Responses that were not 2xx or 3xx.
    pub non_2xx: u64,
    /// Connect, read, write errors and timeouts.
    pub socket_errors: u64,
    pub requests_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// `1.23ms`, `456.00us`, `1.02s` -> milliseconds.
fn wrk_duration_ms(s: &str) -> Option<f64> {
    let (n, factor) = if let Some(n) = s.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return None;
    };
    n.parse::<f64>().ok().map(|v| v * factor)
}

/// Runs `wrk --latency` with `args` (threads, connections, duration, script, URL) and
/// reads its figures.
pub fn run_wrk(args: &[&str]) -> Result<(WrkFigures, String)> {
    let out = Command::new("wrk")
        .arg("--latency")
        .args(args)
        .output()
        .context("running wrk")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!("wrk failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    }
    let find = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find(|l| l.starts_with(prefix))
            .map(str::to_owned)
    };
    let requests: u64 = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next())
        .context("wrk output: requests")?
        .parse()?;
    let non_2xx: u64 = match find("Non-2xx or 3xx responses:") {
        Some(l) => l.rsplit(' ').next().unwrap_or("0").parse()?,
        None => 0,
    };
    let socket_errors: u64 = match find("Socket errors:") {
        Some(l) => l
            .trim_start_matches("Socket errors:")
            .split(',')
            .filter_map(|part| part.split_whitespace().nth(1))
            .map(|n| n.parse::<u64>().unwrap_or(0))
            .sum(),
        None => 0,
    };
    let requests_per_sec: f64 = find("Requests/sec:")
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .context("wrk output: Requests/sec")?
        .parse()?;
    let percentile = |p: &str| {
        find(p)
            .and_then(|l| l.split_whitespace().nth(1).and_then(wrk_duration_ms))
            .context("wrk output: latency distribution")
    };
    Ok((
        WrkFigures {
            requests,
            non_2xx,
            socket_errors,
            requests_per_sec,
            p50_ms: percentile("50%")?,
            p99_ms: percentile("99%")?,
        },
        text,
    ))
}
