//! TCP monitor executor: a connection to `hostname:port`, optionally sending `data`
//! and reading what comes back.
//!
//! What a run does:
//! 1. Resolves the host (skipped for IP literals): with the process-wide hickory
//!    resolver, or with the operating system's resolver (`getaddrinfo`) when the
//!    environment says `USE_OS_DNS_RESOLVER=true`. Only addresses of `ipFamily` count.
//! 2. Connects to the first address that accepts.
//! 3. Sends `data` if there is any.
//! 4. Reads the response if `data` was sent or an assertion reads RESPONSE_DATA (so a
//!    banner can be checked without sending anything). Reading stops when the peer
//!    closes or resets the connection, at [`MAX_RESPONSE_BYTES`], after
//!    [`READ_IDLE_TIMEOUT`] without a new byte, or after [`FIRST_BYTE_TIMEOUT`] if
//!    nothing came at all. None of these is an error; the assertions judge the data.
//!
//! Timing: `dns` and `tcp` (connect) phases; `firstByte` from the start of sending (or
//! from the connect, without data) to the first byte received; `download` from the
//! first to the last byte received. When nothing was received, `firstByte` runs to the
//! moment reading stopped (the close or the first-byte timeout). `total` is the sum of
//! all phases. `responseTime` is the time of the service itself, DNS excluded: the
//! connect time, plus the exchange (`firstByte` + `download`) when a response was
//! read. RESPONSE_TIME assertions and `degradedResponseTime` / `maxResponseTime`
//! compare with `responseTime`. Waiting for more bytes that never came (the idle
//! timeout) is counted nowhere.
//!
//! Verdict: any failed assertion or `maxResponseTime` exceeded fails the run;
//! `degradedResponseTime` exceeded degrades it. Without assertions a connection that
//! opened is a pass. DNS failures, refused or unreachable connections and runs past
//! the time limit are errors (DNS, CONNECT, TIMEOUT).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::assert::{self, Actual};
use super::connect::connect_any;
use super::http_error::FetchError;
use super::resolve::{AddressList, literal};
use super::timed_http::millis;
use super::{ExecEnv, Executor};
use crate::model::check::TcpMonitorSpec;
use crate::model::result::TcpResponseSummary;
use crate::model::{
    AssertionResult, AssertionSource, CheckType, ErrorKind, IpFamily, RunResult, TimingPhases,
};
use std::borrow::Cow;

/// Most bytes of a response kept; reading stops there.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// How long a run waits for the first byte of a response.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a run waits for more bytes once some arrived.
pub const READ_IDLE_TIMEOUT: Duration = Duration::from_millis(500);

impl Executor for TcpMonitorSpec {
    async fn run(&self, env: &ExecEnv) -> RunResult {
        run_tcp_monitor(self, env).await
    }
}

/// What a run has done so far; kept when the run is cut short.
#[derive(Default)]
struct Progress {
    phases: TimingPhases,
    /// What the run was doing, for a timeout message.
    stage: &'static str,
    /// `host:port` as the check names it.
    target: String,
    address: Option<SocketAddr>,
    bytes_sent: u64,
    /// The response, if the run read one.
    received: Option<Vec<u8>>,
    truncated: bool,
}

async fn run_tcp_monitor(spec: &TcpMonitorSpec, env: &ExecEnv) -> RunResult {
    let started_at = Utc::now();
    let limit = env.run_timeout(CheckType::Tcp);
    let mut p = Progress {
        stage: "starting",
        ..Progress::default()
    };
    let outcome = match tokio::time::timeout(limit, exchange(env, spec, &mut p)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(FetchError::new(
            ErrorKind::Timeout,
            format!(
                "the TCP check did not finish within its time limit of {} ms (it was {} {})",
                limit.as_millis(),
                p.stage,
                p.target
            ),
        )),
    };
    let stopped_at = Utc::now();
    let mut phases = p.phases;
    let response_time = phases.tcp + phases.first_byte + phases.download;
    phases.total = phases.dns + response_time;

    let mut result = match outcome {
        Ok(()) => {
            let text = p
                .received
                .as_deref()
                .map(|bytes| String::from_utf8_lossy(bytes));
            let time = response_time.to_string();
            let assertions: Vec<AssertionResult> = spec
                .request
                .assertions
                .iter()
                .map(|a| match a.source {
                    AssertionSource::ResponseData => {
                        assert::evaluate(a, text.clone().map_or(Actual::Missing, Actual::Text))
                    }
                    AssertionSource::ResponseTime => {
                        assert::evaluate(a, Actual::Text(Cow::Borrowed(&time)))
                    }
                    _ => assert::outcome(a, None, false),
                })
                .collect();
            let failed = assertions.iter().any(|a| !a.passed)
                || spec
                    .max_response_time
                    .is_some_and(|max| response_time > max);
            let degraded = spec
                .degraded_response_time
                .is_some_and(|d| response_time > d);
            let mut r = RunResult::new(
                CheckType::Tcp,
                started_at,
                stopped_at,
                failed,
                degraded,
                Some(response_time),
                None,
            );
            r.assertions = assertions;
            r
        }
        Err(error) => RunResult::new(
            CheckType::Tcp,
            started_at,
            stopped_at,
            false,
            false,
            None,
            Some(error.into()),
        ),
    };
    result.timing_phases = Some(phases);
    result.tcp = Some(TcpResponseSummary {
        address: p.address.map(|a| a.to_string()),
        bytes_sent: p.bytes_sent,
        data_size: p.received.as_ref().map_or(0, |r| r.len() as u64),
        data: p
            .received
            .as_deref()
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned()),
        data_truncated: p.truncated,
    });
    result.refresh_status();
    result
}

/// Resolves, connects, sends and reads, recording into `p`.
async fn exchange(
    env: &ExecEnv,
    spec: &TcpMonitorSpec,
    p: &mut Progress,
) -> Result<(), FetchError> {
    let request = &spec.request;
    let (Some(host), Some(port)) = (request.host(), request.port) else {
        return Err(FetchError::new(
            ErrorKind::InvalidJob,
            "the TCP check names no host or no port",
        ));
    };
    p.target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let family = request.ip_family;

    let addrs = match host.parse::<IpAddr>() {
        Ok(ip) => literal(ip, family, "the host")?,
        Err(_) => {
            p.stage = "resolving";
            let start = Instant::now();
            let found = if env.os_dns_resolver {
                os_lookup(&host, port, family).await
            } else {
                env.http.resolver().lookup_for(&host, family).await
            };
            p.phases.dns = millis(start.elapsed());
            found?
        }
    };

    p.stage = "connecting to";
    let start = Instant::now();
    let mut stream = connect_any(&addrs, port, &p.target).await?;
    p.phases.tcp = millis(start.elapsed());
    p.address = stream.peer_addr().ok();

    let exchange_start = Instant::now();
    if let Some(data) = request.payload() {
        p.stage = "sending data to";
        stream
            .write_all(data.as_bytes())
            .await
            .map_err(|e| send_error(&p.target, &e))?;
        stream
            .flush()
            .await
            .map_err(|e| send_error(&p.target, &e))?;
        p.bytes_sent = data.len() as u64;
    }
    let reads_response = request.payload().is_some()
        || request
            .assertions
            .iter()
            .any(|a| a.source == AssertionSource::ResponseData);
    if reads_response {
        p.stage = "reading from";
        read_response(&mut stream, p, exchange_start).await?;
    }
    p.stage = "done with";
    Ok(())
}

/// Reads until close, the cap, or a read timeout (see the module doc).
async fn read_response(
    stream: &mut TcpStream,
    p: &mut Progress,
    start: Instant,
) -> Result<(), FetchError> {
    let mut chunk = vec![0u8; 8 * 1024];
    let mut first_at: Option<Instant> = None;
    let mut last_at = start;
    p.received = Some(Vec::new());
    let end = loop {
        let wait = if first_at.is_some() {
            READ_IDLE_TIMEOUT
        } else {
            FIRST_BYTE_TIMEOUT
        };
        let n = match tokio::time::timeout(wait, stream.read(&mut chunk)).await {
            // Idle: the response ended at the last byte (or nothing came at all).
            Err(_) if first_at.is_some() => break last_at,
            Err(_) => break Instant::now(),
            Ok(Ok(0)) => break Instant::now(),
            Ok(Ok(n)) => n,
            Ok(Err(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                break Instant::now();
            }
            Ok(Err(e)) => {
                return Err(FetchError::protocol(format!(
                    "reading the response from {} failed: {e}",
                    p.target
                )));
            }
        };
        let now = Instant::now();
        first_at.get_or_insert(now);
        last_at = now;
        let received = p.received.get_or_insert_with(Vec::new);
        let room = MAX_RESPONSE_BYTES - received.len();
        if n > room {
            received.extend_from_slice(&chunk[..room]);
            p.truncated = true;
            break now;
        }
        received.extend_from_slice(&chunk[..n]);
    };
    let first = first_at.unwrap_or(end);
    p.phases.first_byte = millis(first.saturating_duration_since(start));
    p.phases.download = millis(end.saturating_duration_since(first));
    Ok(())
}

/// The addresses of `host` from the operating system's resolver: those of `family`,
/// or both families (IPv6 first, alternating) when the check pins none.
async fn os_lookup(
    host: &str,
    port: u16,
    family: Option<IpFamily>,
) -> Result<AddressList, FetchError> {
    let found = tokio::net::lookup_host((host, port)).await.map_err(|e| {
        FetchError::dns(format!(
            "cannot resolve {host} with the operating system's resolver: {e}"
        ))
    })?;
    let (mut v6, mut v4) = (Vec::new(), Vec::new());
    for addr in found {
        let ip = addr.ip();
        let wanted = match family {
            None => true,
            Some(IpFamily::IPv4) => ip.is_ipv4(),
            Some(IpFamily::IPv6) => ip.is_ipv6(),
        };
        let same_family = if ip.is_ipv6() { &mut v6 } else { &mut v4 };
        if wanted && !same_family.contains(&ip) {
            same_family.push(ip);
        }
    }
    let list = AddressList::interleaved(v6.into_iter(), v4.into_iter());
    if list.is_empty() {
        let which = match family {
            Some(IpFamily::IPv4) => "IPv4 address",
            Some(IpFamily::IPv6) => "IPv6 address",
            None => "address",
        };
        return Err(FetchError::dns(format!(
            "cannot resolve {host}: the operating system's resolver knows no {which} for it"
        )));
    }
    Ok(list)
}

fn send_error(target: &str, error: &io::Error) -> FetchError {
    let why = match error.kind() {
        io::ErrorKind::ConnectionReset => "the connection was reset".to_owned(),
        io::ErrorKind::BrokenPipe => "the connection was closed".to_owned(),
        _ => error.to_string(),
    };
    FetchError::protocol(format!("cannot send the data to {target}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_must_match_the_family() {
        let v4: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(literal(v4, Some(IpFamily::IPv4), "the host").is_ok());
        assert!(literal(v4, None, "the host").is_ok());
        assert_eq!(
            literal(v4, Some(IpFamily::IPv6), "the host")
                .unwrap_err()
                .kind,
            ErrorKind::Dns
        );
    }

    #[tokio::test]
    async fn os_lookup_of_localhost_gives_loopback_addresses() {
        let list = os_lookup("localhost", 80, Some(IpFamily::IPv4))
            .await
            .unwrap();
        assert!(!list.is_empty());
        assert!(list.iter().all(|ip| ip.is_ipv4() && ip.is_loopback()));
    }
}
