//! DNS monitor executor: one query, with recursion desired, to exactly one name server
//! over exactly the protocol the check names (UDP or TCP). No cache, no retry over
//! the other protocol (a truncated UDP answer is reported as it came, `TC` set), no
//! fallback to other servers.
//!
//! The query goes through a hickory connection to that one server
//! ([`TokioConnectionProvider`]), not through a resolver, so every response code comes
//! back as a response: NXDOMAIN, SERVFAIL or REFUSED are answers to assert on, not
//! errors. Errors are what keeps an answer from arriving: an unresolvable `nameServer`
//! host (DNS), a refused or unreachable server (CONNECT), no answer within the run's
//! time limit (TIMEOUT), an answer that cannot be decoded (PROTOCOL).
//!
//! `responseTime` is the time from opening the connection (for TCP, the connect is
//! included) to the answer; resolving a `nameServer` host name is not included.
//!
//! Verdict: failed assertions or `maxResponseTime` exceeded fail the run;
//! `degradedResponseTime` exceeded degrades it. Unless an assertion reads
//! RESPONSE_CODE, any response code but NOERROR fails the run.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use chrono::Utc;
use hickory_resolver::config::{NameServerConfig, ResolverOpts};
use hickory_resolver::name_server::{ConnectionProvider, TokioConnectionProvider};
use hickory_resolver::proto::op::{Message, Query, ResponseCode};
use hickory_resolver::proto::rr::rdata::SVCB;
use hickory_resolver::proto::rr::{Name, RData, Record, RecordType};
use hickory_resolver::proto::xfer::{DnsHandle, DnsRequestOptions, FirstAnswer, Protocol};
use hickory_resolver::proto::{ProtoError, ProtoErrorKind};
use serde_json::{Value, json};

use super::assert::{self, Actual};
use super::http_error::FetchError;
use super::timed_http::millis;
use super::{ExecEnv, Executor};
use crate::model::check::{DNS_RESPONSE_CODES, DnsMonitorSpec, DnsProtocol, DnsRecordType};
use crate::model::result::DnsResponseSummary;
use crate::model::{
    Assertion, AssertionResult, AssertionSource, CheckType, ErrorKind, IpFamily, RunResult,
};
use std::borrow::Cow;

/// Records of one section kept in the text and JSON answers.
pub const MAX_RECORDS: usize = 100;

/// The system's DNS configuration as DNS monitors need it: the name server to ask
/// when a check names none. Read once per process.
pub(crate) struct DnsEnv {
    /// The first configured name server, or why there is none.
    system_server: Result<SocketAddr, String>,
}

impl DnsEnv {
    /// Reads the system configuration (`/etc/resolv.conf` on Unix).
    pub(crate) fn from_system() -> DnsEnv {
        let system_server = match hickory_resolver::system_conf::read_system_conf() {
            Ok((config, _)) => config
                .name_servers()
                .first()
                .map(|ns| ns.socket_addr)
                .ok_or_else(|| "the system DNS configuration names no server".to_owned()),
            Err(e) => Err(format!("cannot read the system DNS configuration: {e}")),
        };
        DnsEnv { system_server }
    }
}

impl Executor for DnsMonitorSpec {
    async fn run(&self, env: &ExecEnv) -> RunResult {
        run_dns_monitor(self, env).await
    }
}

/// What a run has got so far.
#[derive(Default)]
struct Progress {
    server: Option<SocketAddr>,
    response_time: Option<f64>,
    response: Option<Message>,
}

async fn run_dns_monitor(spec: &DnsMonitorSpec, env: &ExecEnv) -> RunResult {
    let started_at = Utc::now();
    let limit = env.run_timeout(CheckType::Dns);
    let mut p = Progress::default();
    let outcome = match tokio::time::timeout(limit, query(env, spec, &mut p)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(FetchError::new(
            ErrorKind::Timeout,
            format!(
                "{} did not answer within the DNS check's time limit of {} ms",
                describe_server(p.server),
                limit.as_millis()
            ),
        )),
    };
    let stopped_at = Utc::now();
    let protocol = spec.request.protocol;

    let (Ok(()), Some(message), Some(time)) = (outcome.as_ref(), p.response, p.response_time)
    else {
        let error = outcome.err().unwrap_or_else(|| {
            FetchError::new(ErrorKind::Internal, "the DNS query ended without an answer")
        });
        return RunResult::new(
            CheckType::Dns,
            started_at,
            stopped_at,
            false,
            false,
            None,
            Some(error.into()),
        );
    };

    let summary = summarize(&message, p.server, protocol);
    let assertions: Vec<AssertionResult> = spec
        .request
        .assertions
        .iter()
        .map(|a| evaluate(a, &summary, time))
        .collect();
    let code_asserted = spec
        .request
        .assertions
        .iter()
        .any(|a| a.source == AssertionSource::ResponseCode);
    let failed = assertions.iter().any(|a| !a.passed)
        || (!code_asserted && message.response_code() != ResponseCode::NoError)
        || spec.max_response_time.is_some_and(|max| time > max);
    let degraded = spec.degraded_response_time.is_some_and(|d| time > d);
    let mut result = RunResult::new(
        CheckType::Dns,
        started_at,
        stopped_at,
        failed,
        degraded,
        Some(time),
        None,
    );
    result.assertions = assertions;
    result.dns = Some(summary);
    result.refresh_status();
    result
}

/// Finds the server, sends the query, and records the answer into `p`.
async fn query(env: &ExecEnv, spec: &DnsMonitorSpec, p: &mut Progress) -> Result<(), FetchError> {
    let request = &spec.request;
    let mut name = Name::from_utf8(request.query.trim()).map_err(|e| {
        FetchError::new(
            ErrorKind::InvalidJob,
            format!("{:?} is not a valid domain name: {e}", request.query),
        )
    })?;
    name.set_fqdn(true);

    let server = name_server(env, spec).await?;
    p.server = Some(server);
    let protocol = match request.protocol {
        DnsProtocol::Udp => Protocol::Udp,
        DnsProtocol::Tcp => Protocol::Tcp,
    };
    let config = NameServerConfig::new(server, protocol);
    let mut opts = ResolverOpts::default();
    // The run's time limit is the deadline; hickory's own timeout only backs it up.
    opts.timeout = env.run_timeout(CheckType::Dns);

    // The provider owns the connection's background task: it lives as long as this
    // run and no longer (dropping it aborts the task and closes the connection).
    let provider = TokioConnectionProvider::default();
    let start = Instant::now();
    let connecting = provider
        .new_connection(&config, &opts)
        .map_err(|e| FetchError::connect(&server.to_string(), &e))?;
    let connection = connecting
        .await
        .map_err(|e| query_error(server, request.protocol, &e))?;
    let mut options = DnsRequestOptions::default();
    options.use_edns = true;
    options.recursion_desired = true;
    let response = connection
        .lookup(
            Query::query(name, record_type(request.record_type)),
            options,
        )
        .first_answer()
        .await
        .map_err(|e| query_error(server, request.protocol, &e))?;
    p.response_time = Some(millis(start.elapsed()));
    p.response = Some(response.into_message());
    drop(provider);
    Ok(())
}

/// The server to ask: the check's `nameServer` (resolved if it is a host name) or the
/// system's first name server.
async fn name_server(env: &ExecEnv, spec: &DnsMonitorSpec) -> Result<SocketAddr, FetchError> {
    let Some(target) = spec.request.name_server_target() else {
        let system = env.dns.system_server.as_ref().map_err(|why| {
            FetchError::new(
                ErrorKind::Dns,
                format!("the check names no nameServer and {why}"),
            )
        })?;
        let port = spec.request.port.unwrap_or(system.port());
        return Ok(SocketAddr::new(system.ip(), port));
    };
    if let Ok(ip) = target.host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, target.port));
    }
    let resolver = env.http.resolver();
    let found = match resolver.lookup(&target.host, IpFamily::IPv4).await {
        Ok(found) => found,
        Err(v4_error) => resolver
            .lookup(&target.host, IpFamily::IPv6)
            .await
            .map_err(|_| v4_error)?,
    };
    let ip = found
        .iter()
        .next()
        .ok_or_else(|| FetchError::dns(format!("cannot resolve {}: no address", target.host)))?;
    Ok(SocketAddr::new(ip, target.port))
}

fn record_type(t: DnsRecordType) -> RecordType {
    match t {
        DnsRecordType::A => RecordType::A,
        DnsRecordType::AAAA => RecordType::AAAA,
        DnsRecordType::CNAME => RecordType::CNAME,
        DnsRecordType::MX => RecordType::MX,
        DnsRecordType::TXT => RecordType::TXT,
        DnsRecordType::SOA => RecordType::SOA,
        DnsRecordType::NS => RecordType::NS,
        DnsRecordType::HTTPS => RecordType::HTTPS,
    }
}

fn describe_server(server: Option<SocketAddr>) -> String {
    match server {
        Some(server) => format!("the name server {server}"),
        None => "the name server".to_owned(),
    }
}

/// Classifies why no answer came.
fn query_error(server: SocketAddr, protocol: DnsProtocol, error: &ProtoError) -> FetchError {
    let proto = protocol.as_str();
    match error.kind() {
        ProtoErrorKind::Timeout => FetchError::new(
            ErrorKind::Timeout,
            format!("the name server {server} did not answer over {proto} in time"),
        ),
        ProtoErrorKind::Io(io) => FetchError::connect(&format!("{server} ({proto})"), io),
        ProtoErrorKind::NoConnections | ProtoErrorKind::Busy => FetchError::new(
            ErrorKind::Connect,
            format!("cannot reach the name server {server} over {proto}"),
        ),
        _ => FetchError::protocol(format!(
            "the answer of the name server {server} over {proto} could not be used: {error}"
        )),
    }
}

/// The response code as DNS tools print it (`RCODE<n>` for codes without a name).
pub fn response_code_name(code: ResponseCode) -> String {
    let n = u16::from(code);
    let index = match n {
        0..=10 => Some(usize::from(n)),
        // 16 is both BADVERS and BADSIG; BADVERS is the name for a response.
        16 => Some(11),
        17..=23 => Some(usize::from(n) - 4),
        _ => None,
    };
    index
        .and_then(|i| DNS_RESPONSE_CODES.get(i))
        .map_or_else(|| format!("RCODE{n}"), |name| (*name).to_owned())
}

/// The result's view of the response: code, text answer and JSON answer.
fn summarize(
    message: &Message,
    server: Option<SocketAddr>,
    protocol: DnsProtocol,
) -> DnsResponseSummary {
    let code = response_code_name(message.response_code());
    let text_answer = message
        .answers()
        .iter()
        .take(MAX_RECORDS)
        .map(record_line)
        .collect::<Vec<_>>()
        .join("\n");
    let question: Vec<Value> = message
        .queries()
        .iter()
        .take(MAX_RECORDS)
        .map(|q| json!({"name": q.name().to_string(), "type": q.query_type().to_string()}))
        .collect();
    let json_answer = json!({
        "Status": code,
        "TC": message.truncated(),
        "RD": message.recursion_desired(),
        "RA": message.recursion_available(),
        "AD": message.authentic_data(),
        "CD": message.checking_disabled(),
        "Question": question,
        "Answer": records_json(message.answers()),
        "Authority": records_json(message.name_servers()),
    });
    DnsResponseSummary {
        name_server: server.map(|s| s.to_string()).unwrap_or_default(),
        protocol: protocol.as_str().to_owned(),
        response_code: code,
        text_answer,
        json_answer,
    }
}

fn records_json(records: &[Record]) -> Value {
    Value::Array(
        records
            .iter()
            .take(MAX_RECORDS)
            .map(|r| {
                json!({
                    "name": r.name().to_string(),
                    "type": r.record_type().to_string(),
                    "TTL": r.ttl(),
                    "data": rdata_text(r.data()),
                })
            })
            .collect(),
    )
}

/// `name TTL class type data`, like a zone file.
fn record_line(record: &Record) -> String {
    format!(
        "{} {} {} {} {}",
        record.name(),
        record.ttl(),
        record.dns_class(),
        record.record_type(),
        rdata_text(record.data())
    )
}

/// The record data in zone-file presentation; TXT strings are quoted.
fn rdata_text(data: &RData) -> String {
    match data {
        RData::TXT(txt) => txt
            .txt_data()
            .iter()
            .map(|s| {
                let text = String::from_utf8_lossy(s);
                let mut quoted = String::with_capacity(text.len() + 2);
                quoted.push('"');
                for c in text.chars() {
                    if matches!(c, '"' | '\\') {
                        quoted.push('\\');
                    }
                    quoted.push(c);
                }
                quoted.push('"');
                quoted
            })
            .collect::<Vec<_>>()
            .join(" "),
        RData::HTTPS(https) => svcb_text(https),
        RData::SVCB(svcb) => svcb_text(svcb),
        other => other.to_string(),
    }
}

/// `priority target key=value...`; list values comma-separated without the trailing
/// comma hickory's display adds, `no-default-alpn` without a value.
fn svcb_text(svcb: &SVCB) -> String {
    let mut text = format!("{} {}", svcb.svc_priority(), svcb.target_name());
    for (key, value) in svcb.svc_params() {
        let value = value.to_string();
        let value = value.trim_end_matches(',');
        if value.is_empty() {
            text.push_str(&format!(" {key}"));
        } else {
            text.push_str(&format!(" {key}={value}"));
        }
    }
    text
}

/// One assertion against the answer. An assertion that cannot be evaluated (a source
/// DNS monitors do not have, a JSON path outside the supported subset) fails.
fn evaluate(a: &Assertion, summary: &DnsResponseSummary, time: f64) -> AssertionResult {
    match a.source {
        AssertionSource::ResponseTime => {
            assert::evaluate(a, Actual::Text(Cow::Owned(time.to_string())))
        }
        AssertionSource::ResponseCode => {
            // Response codes are names; `nxdomain` means NXDOMAIN.
            let upper = Assertion {
                target: a.target.trim().to_ascii_uppercase(),
                ..a.clone()
            };
            let mut outcome =
                assert::evaluate(&upper, Actual::Text(Cow::Borrowed(&summary.response_code)));
            outcome.target = a.target.clone();
            outcome
        }
        AssertionSource::TextAnswer => {
            assert::evaluate(a, Actual::Text(Cow::Borrowed(&summary.text_answer)))
        }
        AssertionSource::JsonAnswer => assert::evaluate_json_path(a, &summary.json_answer),
        _ => assert::outcome(a, None, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_resolver::proto::rr::rdata::TXT;

    #[test]
    fn response_codes_have_their_tool_names() {
        assert_eq!(response_code_name(ResponseCode::NoError), "NOERROR");
        assert_eq!(response_code_name(ResponseCode::NXDomain), "NXDOMAIN");
        assert_eq!(response_code_name(ResponseCode::Refused), "REFUSED");
        assert_eq!(response_code_name(ResponseCode::NotZone), "NOTZONE");
        assert_eq!(response_code_name(ResponseCode::BADVERS), "BADVERS");
        assert_eq!(response_code_name(ResponseCode::BADKEY), "BADKEY");
        assert_eq!(response_code_name(ResponseCode::BADCOOKIE), "BADCOOKIE");
        assert_eq!(response_code_name(ResponseCode::Unknown(3000)), "RCODE3000");
    }

    #[test]
    fn svcb_params_are_listed_without_trailing_commas() {
        use hickory_resolver::proto::rr::rdata::HTTPS;
        use hickory_resolver::proto::rr::rdata::svcb::{Alpn, SvcParamKey, SvcParamValue};
        let svcb = SVCB::new(
            1,
            Name::root(),
            vec![
                (
                    SvcParamKey::Alpn,
                    SvcParamValue::Alpn(Alpn(vec!["h2".into(), "h3".into()])),
                ),
                (SvcParamKey::NoDefaultAlpn, SvcParamValue::NoDefaultAlpn),
                (SvcParamKey::Port, SvcParamValue::Port(8443)),
            ],
        );
        assert_eq!(
            rdata_text(&RData::HTTPS(HTTPS(svcb))),
            "1 . alpn=h2,h3 no-default-alpn port=8443"
        );
    }

    #[test]
    fn txt_data_is_quoted() {
        let txt = RData::TXT(TXT::new(vec!["v=spf1 -all".into(), "say \"hi\"".into()]));
        assert_eq!(rdata_text(&txt), r#""v=spf1 -all" "say \"hi\"""#);
    }

    #[test]
    fn the_default_server_comes_from_the_system_configuration() {
        let env = DnsEnv::from_system();
        match hickory_resolver::system_conf::read_system_conf() {
            Ok((config, _)) if !config.name_servers().is_empty() => {
                assert_eq!(env.system_server, Ok(config.name_servers()[0].socket_addr));
            }
            _ => assert!(env.system_server.is_err()),
        }
    }
}
