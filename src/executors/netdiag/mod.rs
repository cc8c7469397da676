//! Network diagnostics of a failed URL or API check: when a run fails on the network
//! path (DNS, connect, TLS, reset, timeout: [`ErrorKind::is_network`]), the failed hop
//! is run once more while its packets are captured, then a traceroute goes to its
//! address. Both become artifacts of the result:
//!
//! - `capture.pcap` (`application/vnd.tcpdump.pcap`): the packets of the re-run attempt
//!   between this host and the target address and port, plus ICMP errors about them;
//!   at most [`capture::MAX_PCAP_BYTES`], for at most the run's remaining time budget
//!   (never less than [`MIN_RERUN_TIME`]). Secret values are masked in it.
//! - `traceroute.json` (`application/json`): the hops to the target address.
//!
//! For a DNS failure the target is the system's name servers (port 53) and the re-run
//! is an uncached lookup of the host.
//!
//! A hop through the location's proxy is re-run through it too, and its target is the
//! proxy (its address and port; its host name for a DNS failure): that is the network
//! path the agent itself takes.
//!
//! Both need `CAP_NET_RAW`. Without it nothing runs and the result says so:
//! `diagnostics: {available: false, reason: "..."}`.

mod capture;
mod packet_filter;
mod traceroute;

use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use bytes::Bytes;
use url::Url;

use super::ExecEnv;
use super::resolve::AddressList;
use super::timed_http::{self, HopOptions, HopProgress, HopRequest};
use crate::model::{ArtifactRef, Diagnostics, ErrorKind, ProxyUrl};
use crate::scrub::Scrubber;

pub use capture::MAX_PCAP_BYTES;

/// Name of the packet capture artifact.
pub const PCAP_ARTIFACT: &str = "capture.pcap";
/// Name of the traceroute artifact.
pub const TRACEROUTE_ARTIFACT: &str = "traceroute.json";
/// Media type of a pcap file.
pub const PCAP_CONTENT_TYPE: &str = "application/vnd.tcpdump.pcap";
/// Shortest time the re-run gets, even when the failed run used up its budget (a
/// timeout): long enough to capture a few retransmissions.
pub const MIN_RERUN_TIME: Duration = Duration::from_secs(3);
/// Most addresses a traceroute is tried to (one per family at most matters).
const MAX_TRACEROUTE_TARGETS: usize = 2;
/// Margin on top of the traceroute round before it is given up on.
const TRACEROUTE_MARGIN: Duration = Duration::from_secs(2);

/// A file produced by a run; its bytes travel apart from the result JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// File name, `[A-Za-z0-9._-]`, unique within a result.
    pub name: String,
    pub content_type: String,
    pub bytes: Bytes,
}

impl Artifact {
    /// How the result refers to it.
    pub fn reference(&self) -> ArtifactRef {
        ArtifactRef {
            name: self.name.clone(),
            content_type: self.content_type.clone(),
            size: self.bytes.len() as u64,
        }
    }
}

/// What diagnostics found.
#[derive(Debug)]
pub(crate) struct Diagnosis {
    pub(crate) diagnostics: Diagnostics,
    pub(crate) artifacts: Vec<Artifact>,
}

impl Diagnosis {
    fn unavailable(reason: String) -> Diagnosis {
        Diagnosis {
            diagnostics: Diagnostics::unavailable(reason),
            artifacts: Vec::new(),
        }
    }
}

/// The hop of a URL or API run that failed on the network, as it can be run again.
#[derive(Debug, Clone)]
pub(crate) struct FailedHop {
    pub(crate) url: Url,
    pub(crate) request: HopRequest,
    pub(crate) opts: HopOptions,
    /// The addresses the hop tried (empty when it failed before it had any): the
    /// proxy's when it went through one.
    pub(crate) addresses: AddressList,
    /// The location's proxy the hop went through.
    pub(crate) proxy: Option<ProxyUrl>,
    pub(crate) kind: ErrorKind,
    /// Masks the run's secrets in the capture.
    pub(crate) scrubber: Scrubber,
}

/// Re-runs `hop` under a packet capture for up to `budget` (at least
/// [`MIN_RERUN_TIME`]), then traces the route to its address.
pub(crate) async fn diagnose_hop(env: &ExecEnv, hop: &FailedHop, budget: Duration) -> Diagnosis {
    let budget = budget.max(MIN_RERUN_TIME);
    let addresses: Vec<IpAddr> = hop.addresses.iter().collect();
    let resolved = !addresses.is_empty();
    if hop.kind == ErrorKind::Dns || !resolved {
        let servers = env.http.resolver().name_servers();
        let Some(first) = servers.first() else {
            return Diagnosis::unavailable(
                "the host name did not resolve and no name server is configured".to_owned(),
            );
        };
        let port = first.port();
        let targets: Vec<IpAddr> = servers.iter().map(|s| s.ip()).collect();
        let (host, family) = match &hop.proxy {
            Some(proxy) => (proxy.host().to_string(), None),
            None => (
                hop.url.host_str().unwrap_or_default().to_owned(),
                hop.opts.family,
            ),
        };
        let resolver = env.http.resolver().without_cache();
        let rerun = async move {
            let _ = resolver.lookup_for(&host, family).await;
        };
        return diagnose(&targets, port, rerun, budget, &hop.scrubber).await;
    }
    let port = match &hop.proxy {
        Some(proxy) => proxy.port(),
        None => hop.url.port_or_known_default().unwrap_or(0),
    };
    let rerun = async {
        let mut progress = HopProgress::default();
        let outcome = timed_http::fetch(
            &env.http,
            &hop.url,
            &hop.request,
            hop.opts,
            hop.proxy.as_ref(),
            &mut progress,
        )
        .await;
        tracing::debug!(ok = outcome.is_ok(), "diagnostic re-run finished");
    };
    diagnose(&addresses, port, rerun, budget, &hop.scrubber).await
}

/// Captures the packets of `rerun` to or from `targets` on `port` for up to `budget`,
/// then traces the route to the first target that can be traced.
async fn diagnose<F>(
    targets: &[IpAddr],
    port: u16,
    rerun: F,
    budget: Duration,
    scrubber: &Scrubber,
) -> Diagnosis
where
    F: Future<Output = ()>,
{
    let socket = match capture::open() {
        Ok(socket) => socket,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Diagnosis::unavailable(format!(
                "packet capture and traceroute need the NET_RAW capability, which this process does not have ({e})"
            ));
        }
        Err(e) => {
            return Diagnosis::unavailable(format!("cannot open a packet capture socket: {e}"));
        }
    };
    let filter = packet_filter::PacketFilter::new(targets.to_vec(), port);
    let running = capture::Capture::start(socket, filter);
    if tokio::time::timeout(budget, rerun).await.is_err() {
        tracing::debug!("the diagnostic re-run used its whole budget");
    }
    let mut problems = Vec::new();
    let mut artifacts = Vec::new();
    match running.finish().await {
        Ok(mut captured) => {
            scrubber.mask_bytes(&mut captured.pcap);
            if captured.dropped > 0 {
                problems.push(format!(
                    "the packet capture stopped at {MAX_PCAP_BYTES} bytes ({} packets left out)",
                    captured.dropped
                ));
            }
            tracing::debug!(packets = captured.packets, "packet capture done");
            artifacts.push(Artifact {
                name: PCAP_ARTIFACT.to_owned(),
                content_type: PCAP_CONTENT_TYPE.to_owned(),
                bytes: Bytes::from(captured.pcap),
            });
        }
        Err(e) => problems.push(format!("the packet capture failed: {e}")),
    }
    match trace_first(targets).await {
        Ok(route) => match serde_json::to_vec_pretty(&route) {
            Ok(json) => artifacts.push(Artifact {
                name: TRACEROUTE_ARTIFACT.to_owned(),
                content_type: "application/json".to_owned(),
                bytes: Bytes::from(json),
            }),
            Err(e) => problems.push(format!("cannot write the traceroute: {e}")),
        },
        Err(why) => problems.push(why),
    }
    Diagnosis {
        diagnostics: Diagnostics {
            available: true,
            reason: (!problems.is_empty()).then(|| problems.join("; ")),
            target: targets.first().map(|ip| ip.to_string()),
        },
        artifacts,
    }
}

/// A traceroute to the first of `targets` (in the order the attempt tried them) that
/// can be traced; the errors of all tries if none can.
async fn trace_first(targets: &[IpAddr]) -> Result<traceroute::Traceroute, String> {
    let mut errors = Vec::new();
    for &target in targets.iter().take(MAX_TRACEROUTE_TARGETS) {
        let task = tokio::task::spawn_blocking(move || traceroute::trace(target));
        match tokio::time::timeout(traceroute::ROUND_TIME + TRACEROUTE_MARGIN, task).await {
            Ok(Ok(Ok(route))) => return Ok(route),
            Ok(Ok(Err(e))) => errors.push(e.to_string()),
            Ok(Err(e)) => errors.push(format!("the traceroute to {target} failed: {e}")),
            Err(_) => errors.push(format!("the traceroute to {target} did not finish in time")),
        }
    }
    if errors.is_empty() {
        errors.push("no address to trace".to_owned());
    }
    Err(errors.join("; "))
}
