//! What one run of a check produced, as the agent reports it and the service stores it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::check::{AssertionSource, CheckType, Comparison};

/// The verdict of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RunStatus {
    Passed,
    Degraded,
    Failed,
}

/// One run of one check on one location.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    pub check_type: CheckType,
    pub status: RunStatus,
    pub started_at: DateTime<Utc>,
    pub stopped_at: DateTime<Utc>,
    /// The run could not be carried out as asked (network error, bad job, timeout).
    pub has_errors: bool,
    /// An assertion or a response-time limit failed.
    pub has_failures: bool,
    pub is_degraded: bool,
    /// The run was cut short (timeout, shutdown, cancel).
    pub aborted: bool,
    /// Measured operation time in milliseconds (request time for URL and API checks).
    pub response_time: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing_phases: Option<TimingPhases>,
    /// The HTTP request sent (API checks), with secrets and credentials masked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<HttpRequestSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<HttpResponseSummary>,
    /// What a TCP monitor connected to and received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpResponseSummary>,
    /// What a DNS monitor asked and was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<DnsResponseSummary>,
    /// What an ICMP monitor sent and got back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp: Option<IcmpSummary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<AssertionResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    /// Whether network diagnostics ran after a network-level failure, or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Diagnostics>,
    /// Files that belong to this result (packet capture, traceroute). Their bytes travel
    /// apart from the result: the agent uploads them before it submits the result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<ArtifactRef>,
}

impl RunResult {
    /// Builds a result and derives `status` from the flags: errors and failures are
    /// FAILED, else degraded is DEGRADED, else PASSED.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        check_type: CheckType,
        started_at: DateTime<Utc>,
        stopped_at: DateTime<Utc>,
        has_failures: bool,
        is_degraded: bool,
        response_time: Option<f64>,
        error: Option<RunError>,
    ) -> RunResult {
        let mut r = RunResult {
            check_type,
            status: RunStatus::Passed,
            started_at,
            stopped_at,
            has_errors: error.is_some(),
            has_failures,
            is_degraded,
            aborted: matches!(
                error.as_ref().map(|e| e.kind),
                Some(ErrorKind::Timeout | ErrorKind::Aborted)
            ),
            response_time,
            timing_phases: None,
            request: None,
            response: None,
            tcp: None,
            dns: None,
            icmp: None,
            assertions: Vec::new(),
            error,
            diagnostics: None,
            artifacts: Vec::new(),
        };
        r.refresh_status();
        r
    }

    /// A result for a run that could not start or finish; `kind` says why.
    pub fn errored(
        check_type: CheckType,
        started_at: DateTime<Utc>,
        kind: ErrorKind,
        message: impl Into<String>,
    ) -> RunResult {
        RunResult::new(
            check_type,
            started_at,
            Utc::now(),
            false,
            false,
            None,
            Some(RunError {
                kind,
                message: message.into(),
            }),
        )
    }

    /// Recomputes `status` after the flags changed.
    pub fn refresh_status(&mut self) {
        self.has_errors = self.error.is_some() || self.has_errors;
        self.status = if self.has_errors || self.has_failures {
            RunStatus::Failed
        } else if self.is_degraded {
            RunStatus::Degraded
        } else {
            RunStatus::Passed
        };
    }
}

/// Network diagnostics of a failed run: a packet capture of the failed attempt run
/// again and a traceroute to its target. They need the `NET_RAW` capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostics {
    /// The diagnostics ran (their files are in `artifacts`).
    pub available: bool,
    /// Why they could not run, or what part of them failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The address the capture and the traceroute were about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl Diagnostics {
    /// Diagnostics that could not run, and why.
    pub fn unavailable(reason: impl Into<String>) -> Diagnostics {
        Diagnostics {
            available: false,
            reason: Some(reason.into()),
            target: None,
        }
    }
}

/// A file attached to a result; the bytes are stored by the service under `name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRef {
    /// File name, `[A-Za-z0-9._-]`, unique within the result.
    pub name: String,
    /// Media type, e.g. `application/vnd.tcpdump.pcap`.
    pub content_type: String,
    /// Size in bytes.
    pub size: u64,
}

/// Timing phases of an HTTP request, in milliseconds. `total` is the sum of the phases
/// of the last hop plus the time spent on redirects before it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimingPhases {
    pub dns: f64,
    pub tcp: f64,
    pub tls: f64,
    pub first_byte: f64,
    pub download: f64,
    pub total: f64,
}

/// The HTTP request a run sent (its first hop), bounded in size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpRequestSummary {
    pub method: String,
    /// The URL with query parameters, without user name and password.
    pub url: String,
    /// Header names in lower case; repeated headers joined with `, `.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Body text up to the executor's cap (lossy UTF-8); absent when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// What came back from an HTTP target, bounded in size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpResponseSummary {
    pub status: u16,
    pub status_text: String,
    /// The URL that answered, after redirects.
    pub url: String,
    #[serde(default)]
    pub redirects: Vec<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Body text (lossy UTF-8), if the executor keeps bodies. It may be a prefix of
    /// what was read: compare its length with `body_size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Bytes received, counted up to the cap.
    pub body_size: u64,
    /// The body was longer than the cap and reading stopped there.
    pub body_truncated: bool,
}

/// What a TCP monitor connected to and received, bounded in size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TcpResponseSummary {
    /// The address the connection was made to (`ip:port`), once connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Bytes of `data` sent after connecting.
    pub bytes_sent: u64,
    /// What the peer sent, as lossy UTF-8, if the run read a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Bytes received, counted up to the cap.
    pub data_size: u64,
    /// The response was longer than the cap and reading stopped there.
    pub data_truncated: bool,
}

/// What a DNS monitor asked and was answered. `textAnswer` and `jsonAnswer` are what
/// TEXT_ANSWER and JSON_ANSWER assertions read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DnsResponseSummary {
    /// The name server asked (`ip:port`).
    pub name_server: String,
    /// `UDP` or `TCP`.
    pub protocol: String,
    /// The response code as DNS tools print it (`NOERROR`, `NXDOMAIN`, ...).
    pub response_code: String,
    /// The answer records as zone-file lines (`name TTL class type data`), one per line.
    pub text_answer: String,
    /// The response as JSON: `Status`, the `TC`/`RD`/`RA`/`AD`/`CD` flags, `Question`,
    /// `Answer` and `Authority` (records as `{name, type, TTL, data}`).
    pub json_answer: serde_json::Value,
}

/// What an ICMP monitor sent and got back. It is also the document JSON_RESPONSE
/// assertions read (e.g. `$.latency.max`, `$.packetsReceived`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IcmpSummary {
    /// The host as the check names it.
    pub hostname: String,
    /// The IP address pinged, once resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Echo requests the run tried to send.
    pub packets_sent: u32,
    /// Echo replies received in time.
    pub packets_received: u32,
    /// Share of the requests without a reply, in percent (0 to 100).
    pub packet_loss: f64,
    /// Round-trip statistics of the replies; absent when none came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyStats>,
    /// Round-trip time of each request in milliseconds, in the order sent; `null` for a
    /// request without a reply.
    #[serde(default)]
    pub rtts: Vec<Option<f64>>,
    /// Requests the operating system refused to send (counted as lost).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub send_errors: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Round-trip statistics in milliseconds; `stdDev` is the population standard deviation
/// (what `ping` prints as `mdev`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LatencyStats {
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    pub std_dev: f64,
}

/// The outcome of one assertion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AssertionResult {
    pub source: AssertionSource,
    pub comparison: Comparison,
    pub property: String,
    pub target: String,
    pub actual: Option<String>,
    pub passed: bool,
}

/// Why a run has errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunError {
    pub kind: ErrorKind,
    pub message: String,
}

/// Error classes; network-level ones trigger diagnostics in later executors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorKind {
    Dns,
    Connect,
    Tls,
    Timeout,
    Protocol,
    /// The job could not be parsed or validated.
    InvalidJob,
    /// The run was stopped (shutdown past the grace period, cancel).
    Aborted,
    /// The agent lacks a privilege the run needs (an ICMP socket it may not open).
    Permission,
    Internal,
}

impl ErrorKind {
    /// Whether the failure happened on the network path (DNS, connect, TLS, reset, timeout).
    pub fn is_network(self) -> bool {
        matches!(
            self,
            ErrorKind::Dns | ErrorKind::Connect | ErrorKind::Tls | ErrorKind::Timeout
        )
    }
}
