//! ICMP monitor executor: `pingCount` echo requests to one host, summarised as packet
//! loss and round-trip statistics.
//!
//! What a run does:
//! 1. Resolves the host (skipped for IP literals) with the process-wide resolver (or the
//!    operating system's with `USE_OS_DNS_RESOLVER=true`); only addresses of the check's
//!    family count and the first one is pinged. A name that does not resolve is a DNS
//!    error.
//! 2. Takes the process's ICMP socket of that family (see [`IcmpEnv`]).
//! 3. Sends the echo requests [`PING_INTERVAL`] apart, each waiting at most
//!    [`packet_timeout`] for its reply. A request without an echo reply in time (or
//!    answered by an ICMP error such as "destination unreachable") is lost. Each round
//!    trip is timed as iputils `ping` times it: from the realtime clock read right
//!    before `sendto` to the kernel's receive timestamp of the reply (`SO_TIMESTAMPNS`),
//!    so task wake-ups are not counted (see `socket.rs`).
//! 4. Computes the loss in percent and the average, minimum, maximum and population
//!    standard deviation of the round-trip times, in milliseconds.
//!
//! Verdict: `responseTime` is the average latency. The run FAILS when no reply came
//! back at all, when the loss exceeds `maxPacketLossThreshold`, when the average
//! exceeds `maxResponseTime` or when an assertion fails; it is DEGRADED when the loss
//! exceeds `degradedPacketLossThreshold` or the average exceeds `degradedResponseTime`.
//! Losing every packet is a failure, not an error. Errors are: a host that does not
//! resolve (DNS), an ICMP socket the process may not open (PERMISSION), and requests
//! the operating system refuses to send at all, e.g. without a route (CONNECT).
//!
//! Sockets: datagram ICMP sockets (`SOCK_DGRAM` with `IPPROTO_ICMP` / `IPPROTO_ICMPV6`)
//! need neither root nor `CAP_NET_RAW`, only a group inside the sysctl
//! `net.ipv4.ping_group_range` (which also governs ICMPv6). When the kernel refuses
//! them, a raw socket is tried, which needs `CAP_NET_RAW`. The sockets and their
//! receive loop are ours (`socket.rs`: surge-ping's read replies without their control
//! messages, so without kernel timestamps); surge-ping decodes replies and ICMP errors.
//! ICMP errors reach raw sockets only: the kernel does not queue them on unconnected
//! datagram ICMP sockets, so there a request they answer is lost by its timeout.
//!
//! Matching replies: with datagram sockets the kernel replaces the echo identifier with
//! the socket's own, and every run of the process shares that socket, so replies can
//! only be told apart by host and sequence number. Sequence numbers therefore come from
//! one process-wide counter per destination ([`reserve_sequences`]): concurrent runs to
//! the same host never share one. Each run also draws a random identifier, which is
//! what separates runs (and other programs) on raw sockets, where the kernel keeps it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::Utc;
use futures_util::future::join_all;
use serde_json::Value;

mod socket;

use socket::{EchoSocket, Pong};

use super::assert::{self, Actual};
use super::http_error::FetchError;
use super::{ExecEnv, Executor};
use crate::model::check::{IcmpMonitorSpec, MAX_PING_COUNT};
use crate::model::result::{IcmpSummary, LatencyStats};
use crate::model::{Assertion, AssertionResult, AssertionSource, CheckType, ErrorKind, IpFamily};
use crate::model::{RunError, RunResult};

/// Time between two echo requests of one run. Short, so that 50 requests go out within
/// 5 s and a run stays far below the 30 s limit of ICMP checks, but no flood: 10
/// packets a second to one host is what `ping -i 0.1` sends.
pub const PING_INTERVAL: Duration = Duration::from_millis(100);
/// Longest wait for one reply: `maxResponseTime` clamped to
/// [`MIN_PACKET_TIMEOUT`]..=[`MAX_PACKET_TIMEOUT`] (a reply slower than the largest
/// acceptable latency is as good as lost).
pub const MAX_PACKET_TIMEOUT: Duration = Duration::from_secs(10);
/// Shortest wait for one reply, whatever `maxResponseTime` says.
pub const MIN_PACKET_TIMEOUT: Duration = Duration::from_secs(1);
/// Bytes of payload in each echo request (the 56 of `ping`).
const PAYLOAD: [u8; 56] = *b"outpost icmp monitor echo request payload 0123456789abcd";
/// Destinations whose sequence counters are kept before idle ones are forgotten.
const MAX_TRACKED_DESTINATIONS: usize = 1024;
/// A destination unused this long has no request in flight: its counter may go.
const SEQUENCE_IDLE: Duration = Duration::from_secs(120);

impl Executor for IcmpMonitorSpec {
    async fn run(&self, env: &ExecEnv) -> RunResult {
        run_icmp_monitor(self, env).await
    }
}

// ------------------------------------------------------------------ shared sockets

/// The process's ICMP sockets, one per family, opened on first use. A socket comes with
/// a task that reads every reply from it, so all runs share it; it is reopened if a run
/// happens on another tokio runtime than the one its task lives on (tests build one
/// runtime each). Opening failures are not remembered: a run after `ping_group_range`
/// was widened succeeds.
#[derive(Default)]
pub(crate) struct IcmpEnv {
    v4: Mutex<Option<SharedSocket>>,
    v6: Mutex<Option<SharedSocket>>,
}

struct SharedSocket {
    runtime: tokio::runtime::Id,
    socket: EchoSocket,
}

impl IcmpEnv {
    pub(crate) fn new() -> IcmpEnv {
        IcmpEnv::default()
    }

    /// The socket of `family`, opened now if needed.
    fn socket(&self, family: IpFamily) -> Result<EchoSocket, FetchError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| FetchError::new(ErrorKind::Internal, format!("no async runtime: {e}")))?
            .id();
        let slot = match family {
            IpFamily::IPv4 => &self.v4,
            IpFamily::IPv6 => &self.v6,
        };
        let mut shared = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = shared.as_ref()
            && s.runtime == runtime
        {
            return Ok(s.socket.clone());
        }
        let socket = open_socket(family)?;
        *shared = Some(SharedSocket {
            runtime,
            socket: socket.clone(),
        });
        Ok(socket)
    }
}

/// Opens an ICMP socket of `family`: datagram first, raw if that is refused.
fn open_socket(family: IpFamily) -> Result<EchoSocket, FetchError> {
    match EchoSocket::open(family) {
        Ok(socket) => {
            tracing::info!(
                family = family_name(family),
                socket_type = ?socket.socket_type(),
                kernel_timestamps = socket.kernel_timestamps(),
                "opened the ICMP socket"
            );
            Ok(socket)
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            Err(FetchError::new(ErrorKind::Permission, permission_message()))
        }
        Err(e) => Err(FetchError::new(
            ErrorKind::Connect,
            format!("cannot open an {} ICMP socket: {e}", family_name(family)),
        )),
    }
}

/// Why no ICMP socket could be opened, naming both ways to allow one.
fn permission_message() -> String {
    let current = std::fs::read_to_string("/proc/sys/net/ipv4/ping_group_range")
        .ok()
        .map(|v| v.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .filter(|v| !v.is_empty() && v.len() < 64)
        .map(|v| format!(" (it is \"{v}\" here)"))
        .unwrap_or_default();
    format!(
        "this process may not open ICMP sockets: datagram ICMP sockets need its group to be \
         within the sysctl net.ipv4.ping_group_range{current}, and raw ICMP sockets need the \
         capability CAP_NET_RAW; widen the range (e.g. sysctl -w \
         net.ipv4.ping_group_range=\"0 2147483647\") or grant CAP_NET_RAW"
    )
}

fn family_name(family: IpFamily) -> &'static str {
    match family {
        IpFamily::IPv4 => "IPv4",
        IpFamily::IPv6 => "IPv6",
    }
}

// ------------------------------------------------------------------ sequence numbers

struct SequenceSlot {
    next: u16,
    used: Instant,
}

/// Next sequence number per destination, for the whole process.
static SEQUENCES: LazyLock<Mutex<HashMap<IpAddr, SequenceSlot>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Reserves `count` consecutive sequence numbers (wrapping at 65536) for requests to
/// `dest` and returns the first. A new destination starts at a random number. See the
/// module documentation for why they must be unique per destination.
pub fn reserve_sequences(dest: IpAddr, count: u16) -> u16 {
    let mut table = SEQUENCES.lock().unwrap_or_else(PoisonError::into_inner);
    let now = Instant::now();
    if table.len() >= MAX_TRACKED_DESTINATIONS && !table.contains_key(&dest) {
        table.retain(|_, slot| now.duration_since(slot.used) < SEQUENCE_IDLE);
    }
    let slot = table.entry(dest).or_insert_with(|| SequenceSlot {
        next: rand::random(),
        used: now,
    });
    let first = slot.next;
    slot.next = first.wrapping_add(count);
    slot.used = now;
    first
}

// ------------------------------------------------------------------ statistics

/// How long one request waits for its reply: `maxResponseTime` clamped to
/// [`MIN_PACKET_TIMEOUT`]..=[`MAX_PACKET_TIMEOUT`], and short enough that `count`
/// requests [`PING_INTERVAL`] apart finish within `limit`.
pub fn packet_timeout(max_response_time: Option<f64>, count: u32, limit: Duration) -> Duration {
    let wanted = max_response_time
        .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
        .unwrap_or(MAX_PACKET_TIMEOUT)
        .clamp(MIN_PACKET_TIMEOUT, MAX_PACKET_TIMEOUT);
    let sending = PING_INTERVAL.saturating_mul(count.saturating_sub(1));
    let room = limit
        .saturating_sub(sending)
        .saturating_sub(Duration::from_millis(500));
    wanted.min(room).max(Duration::from_millis(100))
}

/// Average, minimum, maximum and population standard deviation of `rtts` (ms), each
/// rounded to the microsecond; `None` without any.
pub fn latency_stats(rtts: &[f64]) -> Option<LatencyStats> {
    if rtts.is_empty() {
        return None;
    }
    let n = rtts.len() as f64;
    let avg = rtts.iter().sum::<f64>() / n;
    let min = rtts.iter().copied().fold(f64::INFINITY, f64::min);
    let max = rtts.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let variance = rtts.iter().map(|r| (r - avg).powi(2)).sum::<f64>() / n;
    Some(LatencyStats {
        avg: round3(avg),
        min: round3(min),
        max: round3(max),
        std_dev: round3(variance.sqrt()),
    })
}

/// Loss in percent of `sent` requests of which `received` were answered.
pub fn packet_loss(sent: u32, received: u32) -> f64 {
    if sent == 0 {
        return 0.0;
    }
    let lost = sent.saturating_sub(received);
    round3(f64::from(lost) * 100.0 / f64::from(sent))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

// ------------------------------------------------------------------ the run

/// What became of one echo request.
enum Echo {
    /// An echo reply after this many milliseconds.
    Reply(f64),
    /// No reply in time, or an ICMP error instead of a reply.
    Lost,
    /// The operating system refused to send it.
    NotSent(io::Error),
}

async fn run_icmp_monitor(spec: &IcmpMonitorSpec, env: &ExecEnv) -> RunResult {
    let started_at = Utc::now();
    let limit = env.run_timeout(CheckType::Icmp);
    let mut summary: Option<IcmpSummary> = None;
    let outcome = match tokio::time::timeout(limit, ping_all(env, spec, limit, &mut summary)).await
    {
        Ok(outcome) => outcome,
        Err(_) => Err(FetchError::new(
            ErrorKind::Timeout,
            format!(
                "the ICMP check of {} did not finish within its time limit of {} ms",
                spec.request.host(),
                limit.as_millis()
            ),
        )),
    };
    let stopped_at = Utc::now();
    let mut result = match (outcome, &summary) {
        (Ok(()), Some(s)) => judge(spec, s, started_at, stopped_at),
        (Ok(()), None) => RunResult::new(
            CheckType::Icmp,
            started_at,
            stopped_at,
            false,
            false,
            None,
            Some(RunError {
                kind: ErrorKind::Internal,
                message: "the ICMP run produced no summary".to_owned(),
            }),
        ),
        (Err(error), _) => RunResult::new(
            CheckType::Icmp,
            started_at,
            stopped_at,
            false,
            false,
            None,
            Some(error.into()),
        ),
    };
    result.icmp = summary;
    result.refresh_status();
    result
}

/// Applies thresholds and assertions to a completed run.
fn judge(
    spec: &IcmpMonitorSpec,
    summary: &IcmpSummary,
    started_at: chrono::DateTime<Utc>,
    stopped_at: chrono::DateTime<Utc>,
) -> RunResult {
    let avg = summary.latency.map(|l| l.avg);
    let doc = serde_json::to_value(summary).unwrap_or(Value::Null);
    let assertions: Vec<AssertionResult> = spec
        .request
        .assertions
        .iter()
        .map(|a| evaluate(a, summary, &doc))
        .collect();
    let loss = summary.packet_loss;
    let failed = summary.packets_received == 0
        || assertions.iter().any(|a| !a.passed)
        || exceeds(Some(loss), spec.max_packet_loss_threshold)
        || exceeds(avg, spec.max_response_time);
    let degraded = exceeds(Some(loss), spec.degraded_packet_loss_threshold)
        || exceeds(avg, spec.degraded_response_time);
    let mut result = RunResult::new(
        CheckType::Icmp,
        started_at,
        stopped_at,
        failed,
        degraded,
        avg,
        None,
    );
    result.assertions = assertions;
    result
}

/// Whether both are known and `value` is above `limit`.
fn exceeds(value: Option<f64>, limit: Option<f64>) -> bool {
    matches!((value, limit), (Some(v), Some(l)) if v > l)
}

/// Resolves, opens the socket and sends every request, leaving the summary in `out`.
async fn ping_all(
    env: &ExecEnv,
    spec: &IcmpMonitorSpec,
    limit: Duration,
    out: &mut Option<IcmpSummary>,
) -> Result<(), FetchError> {
    let request = &spec.request;
    let host = request.host();
    let family = request.family();
    let count = request.count().clamp(1, MAX_PING_COUNT);
    let ip = resolve(env, host, family).await?;
    let socket = env.icmp.socket(family)?;

    // `count` is at most 50, so the cast and the sequence arithmetic cannot overflow.
    let first_seq = reserve_sequences(ip, count as u16);
    let ident: u16 = rand::random();
    let wait = packet_timeout(spec.max_response_time, count, limit);
    let start = tokio::time::Instant::now();
    let echoes = join_all((0..count).map(|i| {
        let socket = &socket;
        let seq = first_seq.wrapping_add(i as u16);
        async move {
            tokio::time::sleep_until(start + PING_INTERVAL * i).await;
            classify(socket.ping(ip, ident, seq, &PAYLOAD, wait).await)
        }
    }))
    .await;

    let mut rtts = Vec::with_capacity(echoes.len());
    let mut send_errors = 0u32;
    let mut first_send_error = None;
    for echo in echoes {
        match echo {
            Echo::Reply(ms) => rtts.push(Some(round3(ms))),
            Echo::Lost => rtts.push(None),
            Echo::NotSent(e) => {
                send_errors += 1;
                first_send_error.get_or_insert(e);
                rtts.push(None);
            }
        }
    }
    let replies: Vec<f64> = rtts.iter().flatten().copied().collect();
    let received = replies.len() as u32;
    *out = Some(IcmpSummary {
        hostname: request.hostname.clone(),
        address: Some(ip.to_string()),
        packets_sent: count,
        packets_received: received,
        packet_loss: packet_loss(count, received),
        latency: latency_stats(&replies),
        rtts,
        send_errors,
    });
    match first_send_error {
        Some(e) if send_errors == count => Err(FetchError::new(
            ErrorKind::Connect,
            format!(
                "cannot send ICMP echo requests to {ip}: {}",
                describe_send_error(&e)
            ),
        )),
        _ => Ok(()),
    }
}

/// What one echo request came to, as the run counts it.
fn classify(pong: Pong) -> Echo {
    match pong {
        Pong::Reply {
            rtt,
            kernel_timestamp,
        } => {
            if !kernel_timestamp {
                tracing::debug!(?rtt, "echo reply timed in user space (no kernel timestamp)");
            }
            Echo::Reply(millis(rtt))
        }
        Pong::IcmpError(packet) => {
            tracing::debug!(?packet, "an ICMP error instead of an echo reply");
            Echo::Lost
        }
        Pong::Timeout => Echo::Lost,
        Pong::NotSent(e) => Echo::NotSent(e),
        Pong::Skipped(why) => {
            tracing::debug!(%why, "echo request lost");
            Echo::Lost
        }
    }
}

fn describe_send_error(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NetworkUnreachable => "the network is unreachable".to_owned(),
        io::ErrorKind::HostUnreachable => "the host is unreachable".to_owned(),
        io::ErrorKind::PermissionDenied => {
            "sending was refused (a firewall or a prohibit route)".to_owned()
        }
        io::ErrorKind::InvalidInput => {
            "the operating system refused the destination (a blackhole route?)".to_owned()
        }
        _ => e.to_string(),
    }
}

/// The address to ping: an IP literal as it is, else the first address of the family.
async fn resolve(env: &ExecEnv, host: &str, family: IpFamily) -> Result<IpAddr, FetchError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return match (ip, family) {
            (IpAddr::V4(_), IpFamily::IPv4) | (IpAddr::V6(_), IpFamily::IPv6) => Ok(ip),
            _ => Err(FetchError::dns(format!(
                "the host {ip} is not an {} address",
                family_name(family)
            ))),
        };
    }
    if env.os_dns_resolver {
        let found = tokio::net::lookup_host((host, 0)).await.map_err(|e| {
            FetchError::dns(format!(
                "cannot resolve {host} with the operating system's resolver: {e}"
            ))
        })?;
        return found
            .map(|addr| addr.ip())
            .find(|ip| ip.is_ipv4() == (family == IpFamily::IPv4))
            .ok_or_else(|| {
                FetchError::dns(format!(
                    "cannot resolve {host}: the operating system's resolver knows no {} \
                     address for it",
                    family_name(family)
                ))
            });
    }
    let list = env.http.resolver().lookup(host, family).await?;
    list.iter()
        .next()
        .ok_or_else(|| FetchError::dns(format!("cannot resolve {host}: no address")))
}

/// Evaluates one assertion against the run's summary (`doc` is its JSON form).
fn evaluate(a: &Assertion, summary: &IcmpSummary, doc: &Value) -> AssertionResult {
    match a.source {
        AssertionSource::Latency => {
            let Some(stats) = summary.latency else {
                return assert::evaluate(a, Actual::Missing);
            };
            let value = match a.property.trim() {
                "" => stats.avg,
                p if p.eq_ignore_ascii_case("avg") => stats.avg,
                p if p.eq_ignore_ascii_case("min") => stats.min,
                p if p.eq_ignore_ascii_case("max") => stats.max,
                p if p.eq_ignore_ascii_case("stdDev") => stats.std_dev,
                _ => return assert::outcome(a, None, false),
            };
            assert::evaluate(a, Actual::Text(Cow::Owned(value.to_string())))
        }
        AssertionSource::PacketLoss => {
            assert::evaluate(a, Actual::Text(Cow::Owned(summary.packet_loss.to_string())))
        }
        AssertionSource::JsonResponse => assert::evaluate_json_path(a, doc),
        _ => assert::outcome(a, None, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Comparison;

    #[test]
    fn stats_of_round_trip_times() {
        let s = latency_stats(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s.avg, 2.5);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 4.0);
        // Population standard deviation: sqrt(1.25).
        assert_eq!(s.std_dev, 1.118);
        let one = latency_stats(&[0.0425]).unwrap();
        assert_eq!(
            (one.avg, one.min, one.max, one.std_dev),
            (0.043, 0.043, 0.043, 0.0)
        );
        assert_eq!(latency_stats(&[]), None);
    }

    #[test]
    fn loss_in_percent() {
        assert_eq!(packet_loss(10, 10), 0.0);
        assert_eq!(packet_loss(10, 8), 20.0);
        assert_eq!(packet_loss(3, 2), 33.333);
        assert_eq!(packet_loss(3, 0), 100.0);
        assert_eq!(packet_loss(0, 0), 0.0);
    }

    #[test]
    fn packet_timeout_follows_max_response_time_within_bounds() {
        let limit = Duration::from_secs(30);
        assert_eq!(
            packet_timeout(Some(2500.0), 10, limit),
            Duration::from_millis(2500)
        );
        assert_eq!(
            packet_timeout(Some(20_000.0), 10, limit),
            MAX_PACKET_TIMEOUT
        );
        assert_eq!(packet_timeout(None, 10, limit), MAX_PACKET_TIMEOUT);
        assert_eq!(packet_timeout(Some(0.0), 10, limit), MIN_PACKET_TIMEOUT);
        assert_eq!(
            packet_timeout(Some(f64::NAN), 10, limit),
            MAX_PACKET_TIMEOUT
        );
        assert_eq!(packet_timeout(Some(-5.0), 10, limit), MAX_PACKET_TIMEOUT);
        // 50 requests take 4.9 s to send; all of them fit in the run's limit.
        let short = Duration::from_secs(6);
        let wait = packet_timeout(None, 50, short);
        assert!(PING_INTERVAL * 49 + wait < short, "{wait:?}");
    }

    #[test]
    fn sequences_are_unique_per_destination() {
        let a: IpAddr = "192.0.2.10".parse().unwrap();
        let b: IpAddr = "192.0.2.11".parse().unwrap();
        let first = reserve_sequences(a, 10);
        let second = reserve_sequences(a, 10);
        assert_eq!(second, first.wrapping_add(10));
        let other = reserve_sequences(b, 3);
        assert_eq!(reserve_sequences(b, 1), other.wrapping_add(3));
        assert_eq!(reserve_sequences(a, 1), first.wrapping_add(20));
    }

    fn summary(latency: Option<LatencyStats>, loss: f64) -> IcmpSummary {
        IcmpSummary {
            hostname: "h.test".into(),
            address: Some("192.0.2.1".into()),
            packets_sent: 4,
            packets_received: 3,
            packet_loss: loss,
            latency,
            rtts: vec![Some(1.0), None, Some(2.0), Some(3.0)],
            send_errors: 0,
        }
    }

    fn assertion(source: AssertionSource, property: &str, c: Comparison, t: &str) -> Assertion {
        Assertion {
            source,
            comparison: c,
            property: property.into(),
            target: t.into(),
            regex: None,
        }
    }

    #[test]
    fn assertions_read_latency_loss_and_the_summary() {
        use AssertionSource as S;
        use Comparison as C;
        let stats = latency_stats(&[1.0, 2.0, 3.0]);
        let s = summary(stats, 25.0);
        let doc = serde_json::to_value(&s).unwrap();
        let cases = [
            (assertion(S::Latency, "", C::Equals, "2"), true),
            (assertion(S::Latency, "max", C::LessThan, "3"), false),
            (assertion(S::Latency, "MIN", C::Equals, "1"), true),
            (assertion(S::Latency, "stdDev", C::GreaterThan, "0.8"), true),
            (assertion(S::Latency, "median", C::Equals, "2"), false),
            (assertion(S::PacketLoss, "", C::LessThan, "30"), true),
            (assertion(S::PacketLoss, "", C::Equals, "0"), false),
            (
                assertion(S::JsonResponse, "$.packetsReceived", C::Equals, "3"),
                true,
            ),
            (assertion(S::JsonResponse, "$.rtts[1]", C::IsNull, ""), true),
            (
                assertion(S::JsonResponse, "$.latency.max", C::GreaterThan, "5"),
                false,
            ),
            (
                assertion(S::JsonResponse, "$.address", C::Contains, "192.0.2"),
                true,
            ),
            (
                assertion(S::JsonResponse, "$.nothing", C::NotNull, ""),
                false,
            ),
            (assertion(S::ResponseTime, "", C::LessThan, "5"), false),
        ];
        for (a, expected) in cases {
            let r = evaluate(&a, &s, &doc);
            assert_eq!(r.passed, expected, "{a:?} -> {r:?}");
        }
        // Without replies there is no latency to compare.
        let none = summary(None, 100.0);
        let doc = serde_json::to_value(&none).unwrap();
        let r = evaluate(
            &assertion(S::Latency, "avg", C::LessThan, "100"),
            &none,
            &doc,
        );
        assert!(!r.passed && r.actual.is_none());
    }

    #[test]
    fn thresholds_on_loss_and_average_latency() {
        let spec = |doc: Value| {
            let mut d = serde_json::json!({"checkType": "ICMP", "request": {"hostname": "h.test"}});
            for (k, v) in doc.as_object().unwrap() {
                d[k] = v.clone();
            }
            match crate::model::CheckSpec::from_document(&d).unwrap() {
                crate::model::CheckSpec::Icmp(m) => m,
                other => panic!("{other:?}"),
            }
        };
        let verdict = |m: &IcmpMonitorSpec, s: &IcmpSummary| {
            let r = judge(m, s, Utc::now(), Utc::now());
            (r.has_failures, r.is_degraded, r.response_time)
        };
        let stats = latency_stats(&[10.0, 20.0]);
        let defaults = spec(serde_json::json!({}));
        assert_eq!(
            verdict(&defaults, &summary(stats, 0.0)),
            (false, false, Some(15.0))
        );
        assert_eq!(
            verdict(&defaults, &summary(stats, 10.0)),
            (false, false, Some(15.0))
        );
        assert_eq!(
            verdict(&defaults, &summary(stats, 15.0)),
            (false, true, Some(15.0))
        );
        assert_eq!(
            verdict(&defaults, &summary(stats, 25.0)),
            (true, true, Some(15.0))
        );
        let slow = spec(serde_json::json!({"degradedResponseTime": 12, "maxResponseTime": 14}));
        assert_eq!(
            verdict(&slow, &summary(stats, 0.0)),
            (true, true, Some(15.0))
        );
        let unlimited = spec(serde_json::json!({"degradedResponseTime": null,
            "maxResponseTime": null, "degradedPacketLossThreshold": null,
            "maxPacketLossThreshold": 100}));
        assert_eq!(
            verdict(&unlimited, &summary(stats, 50.0)),
            (false, false, Some(15.0))
        );
        // Nothing came back: failed whatever the thresholds say.
        let mut lost = summary(None, 100.0);
        lost.packets_received = 0;
        assert_eq!(verdict(&unlimited, &lost), (true, false, None));
    }

    #[test]
    fn the_permission_message_names_the_sysctl_and_the_capability() {
        let m = permission_message();
        assert!(m.contains("net.ipv4.ping_group_range"), "{m}");
        assert!(m.contains("CAP_NET_RAW"), "{m}");
    }
}
