//! Traceroute to the address of a failed attempt, with `trippy-core`: ICMP echo probes
//! with rising TTL, one round, at most [`MAX_TTL`] hops and [`ROUND_TIME`]. Raw sockets:
//! needs `CAP_NET_RAW`. The tracer blocks, so it runs on a blocking thread.
//!
//! The result is a JSON document listing the hops: for each TTL the addresses that
//! answered, probes sent and received and the best round-trip time.

use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;
use trippy_core::{Builder, PrivilegeMode, Protocol};

/// Highest TTL probed.
pub(crate) const MAX_TTL: u8 = 16;
/// Longest a traceroute round lasts.
pub(crate) const ROUND_TIME: Duration = Duration::from_secs(2);
/// Shortest round: answers that come in just after the target's are still counted.
const MIN_ROUND_TIME: Duration = Duration::from_millis(200);
/// How long the tracer waits for late answers after the target answered.
const GRACE: Duration = Duration::from_millis(100);

/// A traceroute as written to the artifact.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Traceroute {
    pub(crate) target: IpAddr,
    pub(crate) protocol: &'static str,
    pub(crate) max_ttl: u8,
    /// A hop of the route answered from the target address.
    pub(crate) reached_target: bool,
    pub(crate) hops: Vec<TracerouteHop>,
}

/// One TTL of a traceroute.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TracerouteHop {
    pub(crate) ttl: u8,
    /// Addresses that answered probes of this TTL (none: no answer).
    pub(crate) addresses: Vec<IpAddr>,
    pub(crate) sent: usize,
    pub(crate) received: usize,
    /// Best round-trip time in milliseconds, if anything answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rtt_ms: Option<f64>,
}

/// Why a traceroute could not run.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct TracerouteError(String);

/// Runs one traceroute round to `target`. Blocks for up to [`ROUND_TIME`] (and a little
/// more to tear down): call it on a blocking thread.
pub(crate) fn trace(target: IpAddr) -> Result<Traceroute, TracerouteError> {
    let tracer = Builder::new(target)
        .privilege_mode(PrivilegeMode::Privileged)
        .protocol(Protocol::Icmp)
        .trace_identifier(rand::random::<u16>())
        .max_ttl(MAX_TTL)
        .max_rounds(Some(1))
        .min_round_duration(MIN_ROUND_TIME)
        .max_round_duration(ROUND_TIME)
        .grace_duration(GRACE)
        .build()
        .map_err(|e| TracerouteError(format!("cannot set up the traceroute: {e}")))?;
    tracer
        .run()
        .map_err(|e| TracerouteError(format!("the traceroute to {target} failed: {e}")))?;
    let state = tracer.snapshot();
    let hops: Vec<TracerouteHop> = state
        .hops()
        .iter()
        .map(|hop| TracerouteHop {
            ttl: hop.ttl(),
            addresses: hop.addrs().copied().collect(),
            sent: hop.total_sent(),
            received: hop.total_recv(),
            rtt_ms: hop.best_ms().map(|ms| (ms * 1000.0).round() / 1000.0),
        })
        .collect();
    let reached_target = hops.iter().any(|h| h.addresses.contains(&target));
    Ok(Traceroute {
        target,
        protocol: "ICMP",
        max_ttl: MAX_TTL,
        reached_target,
        hops,
    })
}
