//! The DNS monitor executor against an in-process hickory-server authority on
//! 127.0.0.1 (UDP and TCP on the same port) serving a zone with every record type the
//! reference lists, plus name servers that never answer and a closed TCP port.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use hickory_server::ServerFuture;
use hickory_server::authority::{Catalog, ZoneType};
use hickory_server::proto::rr::rdata::svcb::{Alpn, SVCB, SvcParamKey, SvcParamValue};
use hickory_server::proto::rr::rdata::{A, AAAA, CNAME, HTTPS, MX, NS, SOA, TXT};
use hickory_server::proto::rr::{Name, RData, Record};
use hickory_server::store::in_memory::InMemoryAuthority;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, UdpSocket};

use outpost::executors::{ExecEnv, run_check};
use outpost::model::check::DnsRecordType;
use outpost::model::{CheckSpec, ErrorKind, RunResult, RunStatus};

// ---------------------------------------------------------------- the authority

const ZONE: &str = "example.test.";
const TTL: u32 = 300;

fn name(s: &str) -> Name {
    Name::from_str(s).unwrap()
}

fn zone_records() -> Vec<Record> {
    let https = SVCB::new(
        1,
        Name::root(),
        vec![(
            SvcParamKey::Alpn,
            SvcParamValue::Alpn(Alpn(vec!["h2".to_owned()])),
        )],
    );
    vec![
        Record::from_rdata(
            name(ZONE),
            TTL,
            RData::SOA(SOA::new(
                name("ns1.example.test."),
                name("hostmaster.example.test."),
                2024010101,
                7200,
                3600,
                1209600,
                60,
            )),
        ),
        Record::from_rdata(name(ZONE), TTL, RData::NS(NS(name("ns1.example.test.")))),
        Record::from_rdata(
            name("ns1.example.test."),
            TTL,
            RData::A(A(Ipv4Addr::new(127, 0, 0, 53))),
        ),
        Record::from_rdata(
            name("www.example.test."),
            TTL,
            RData::A(A(Ipv4Addr::new(192, 0, 2, 10))),
        ),
        Record::from_rdata(
            name("www.example.test."),
            TTL,
            RData::AAAA(AAAA(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10))),
        ),
        Record::from_rdata(
            name("alias.example.test."),
            TTL,
            RData::CNAME(CNAME(name("www.example.test."))),
        ),
        Record::from_rdata(
            name(ZONE),
            TTL,
            RData::MX(MX::new(10, name("mail.example.test."))),
        ),
        Record::from_rdata(
            name(ZONE),
            TTL,
            RData::TXT(TXT::new(vec!["v=spf1 -all".to_owned()])),
        ),
        Record::from_rdata(name(ZONE), TTL, RData::HTTPS(HTTPS(https))),
    ]
}

/// Starts the authority on 127.0.0.1, UDP and TCP on one port; returns that address.
async fn start_authority() -> SocketAddr {
    let mut authority = InMemoryAuthority::empty(name(ZONE), ZoneType::Primary, false);
    for record in zone_records() {
        assert!(authority.upsert_mut(record, 1));
    }
    let mut catalog = Catalog::new();
    catalog.upsert(name(ZONE).into(), vec![Arc::new(authority)]);
    let mut server = ServerFuture::new(catalog);
    let (udp, tcp) = bind_pair().await;
    let addr = udp.local_addr().unwrap();
    server.register_socket(udp);
    server.register_listener(tcp, Duration::from_secs(5));
    tokio::spawn(async move {
        let _ = server.block_until_done().await;
    });
    addr
}

/// A UDP socket and a TCP listener on the same free loopback port.
async fn bind_pair() -> (UdpSocket, TcpListener) {
    for _ in 0..20 {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = udp.local_addr().unwrap().port();
        if let Ok(tcp) = TcpListener::bind(("127.0.0.1", port)).await {
            return (udp, tcp);
        }
    }
    panic!("no loopback port is free for both UDP and TCP");
}

/// A name server that receives queries over UDP and TCP and never answers.
async fn mute_server() -> SocketAddr {
    let (udp, tcp) = bind_pair().await;
    let addr = udp.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while udp.recv_from(&mut buf).await.is_ok() {}
    });
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = tcp.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 512];
                while let Ok(1..) = stream.read(&mut buf).await {}
            });
        }
    });
    addr
}

// ---------------------------------------------------------------- helpers

fn dns_check(
    server: &str,
    query: &str,
    record_type: &str,
    protocol: &str,
    extra: Value,
) -> CheckSpec {
    let mut request = json!({"query": query, "recordType": record_type,
        "nameServer": server, "protocol": protocol});
    for (k, v) in extra.as_object().unwrap() {
        request[k] = v.clone();
    }
    CheckSpec::from_document(&json!({"checkType": "DNS", "name": "d", "request": request})).unwrap()
}

fn assertion(source: &str, comparison: &str, property: &str, target: &str) -> Value {
    json!({"source": source, "comparison": comparison, "property": property, "target": target})
}

async fn run(spec: &CheckSpec) -> RunResult {
    run_check(spec, &ExecEnv::new(None).unwrap()).await
}

/// The query and the record data expected for each type.
fn expected(t: DnsRecordType) -> (&'static str, &'static str) {
    match t {
        DnsRecordType::A => ("www.example.test", "192.0.2.10"),
        DnsRecordType::AAAA => ("www.example.test", "2001:db8::10"),
        DnsRecordType::CNAME => ("alias.example.test", "www.example.test."),
        DnsRecordType::MX => ("example.test", "10 mail.example.test."),
        DnsRecordType::TXT => ("example.test", "\"v=spf1 -all\""),
        DnsRecordType::SOA => (
            "example.test",
            "ns1.example.test. hostmaster.example.test. 2024010101 7200 3600 1209600 60",
        ),
        DnsRecordType::NS => ("example.test", "ns1.example.test."),
        DnsRecordType::HTTPS => ("example.test", "1 . alpn=h2"),
    }
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn every_record_type_over_udp_and_tcp() {
    let server = start_authority().await.to_string();
    for protocol in ["UDP", "TCP"] {
        for t in DnsRecordType::ALL {
            let (query, data) = expected(t);
            let spec = dns_check(&server, query, t.as_str(), protocol, json!({}));
            let result = run(&spec).await;
            assert_eq!(
                result.status,
                RunStatus::Passed,
                "{t:?} {protocol}: {result:?}"
            );
            assert!(result.response_time.is_some());
            let dns = result.dns.as_ref().unwrap();
            assert_eq!(dns.protocol, protocol);
            assert_eq!(dns.name_server, server);
            assert_eq!(dns.response_code, "NOERROR");
            let owner = format!("{query}.");
            assert_eq!(
                dns.text_answer,
                format!("{owner} {TTL} IN {} {data}", t.as_str()),
                "{t:?} {protocol}"
            );
            let answer = &dns.json_answer["Answer"];
            assert_eq!(answer.as_array().unwrap().len(), 1, "{t:?}");
            assert_eq!(answer[0]["name"], owner.as_str());
            assert_eq!(answer[0]["type"], t.as_str());
            assert_eq!(answer[0]["TTL"], TTL);
            assert_eq!(answer[0]["data"], data);
            assert_eq!(dns.json_answer["Status"], "NOERROR");
            assert_eq!(dns.json_answer["RD"], true);
            assert_eq!(dns.json_answer["TC"], false);
            assert_eq!(dns.json_answer["Question"][0]["name"], owner.as_str());
        }
    }
}

#[tokio::test]
async fn nxdomain_is_an_answer_to_assert_on() {
    let server = start_authority().await.to_string();
    for protocol in ["UDP", "TCP"] {
        // Without a RESPONSE_CODE assertion, anything but NOERROR fails the run.
        let plain = dns_check(&server, "nothing.example.test", "A", protocol, json!({}));
        let result = run(&plain).await;
        assert_eq!(result.status, RunStatus::Failed);
        assert!(result.has_failures && !result.has_errors, "{result:?}");
        let dns = result.dns.as_ref().unwrap();
        assert_eq!(dns.response_code, "NXDOMAIN");
        assert_eq!(dns.text_answer, "");
        assert_eq!(dns.json_answer["Authority"][0]["type"], "SOA");

        let asserted = dns_check(
            &server,
            "nothing.example.test",
            "A",
            protocol,
            json!({"assertions": [assertion("RESPONSE_CODE", "EQUALS", "", "NXDOMAIN")]}),
        );
        let result = run(&asserted).await;
        assert_eq!(result.status, RunStatus::Passed, "{result:?}");
        assert_eq!(result.assertions[0].actual.as_deref(), Some("NXDOMAIN"));

        let wrong = dns_check(
            &server,
            "www.example.test",
            "A",
            protocol,
            json!({"assertions": [assertion("RESPONSE_CODE", "EQUALS", "", "nxdomain")]}),
        );
        let result = run(&wrong).await;
        assert_eq!(result.status, RunStatus::Failed);
        assert_eq!(result.assertions[0].actual.as_deref(), Some("NOERROR"));
    }
}

#[tokio::test]
async fn a_name_outside_the_zone_is_refused() {
    let server = start_authority().await.to_string();
    let spec = dns_check(
        &server,
        "elsewhere.test",
        "A",
        "UDP",
        json!({"assertions": [assertion("RESPONSE_CODE", "EQUALS", "", "REFUSED")]}),
    );
    let result = run(&spec).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
}

#[tokio::test]
async fn text_and_json_answer_assertions() {
    let server = start_authority().await.to_string();
    let cases = [
        (
            "TEXT_ANSWER",
            "CONTAINS",
            "",
            "www.example.test. 300 IN A 192.0.2.10",
            true,
        ),
        ("TEXT_ANSWER", "CONTAINS", "", "192.0.2.99", false),
        ("TEXT_ANSWER", "NOT_CONTAINS", "", "192.0.2.99", true),
        ("TEXT_ANSWER", "NOT_EMPTY", "", "", true),
        ("TEXT_ANSWER", "IS_EMPTY", "", "", false),
        (
            "TEXT_ANSWER",
            "EQUALS",
            "",
            "www.example.test. 300 IN A 192.0.2.10",
            true,
        ),
        (
            "TEXT_ANSWER",
            "NOT_EQUALS",
            "",
            "www.example.test. 300 IN A 192.0.2.10",
            false,
        ),
        (
            "JSON_ANSWER",
            "EQUALS",
            "$.Answer[0].data",
            "192.0.2.10",
            true,
        ),
        (
            "JSON_ANSWER",
            "EQUALS",
            "$.Answer[0].data",
            "192.0.2.11",
            false,
        ),
        (
            "JSON_ANSWER",
            "NOT_EQUALS",
            "$.Answer[0].data",
            "192.0.2.11",
            true,
        ),
        ("JSON_ANSWER", "EQUALS", "$.Answer.length", "1", true),
        ("JSON_ANSWER", "GREATER_THAN", "$.Answer.length", "1", false),
        ("JSON_ANSWER", "EQUALS", "$.Status", "NOERROR", true),
        (
            "JSON_ANSWER",
            "GREATER_THAN",
            "$.Answer[0].TTL",
            "299",
            true,
        ),
        ("JSON_ANSWER", "LESS_THAN", "$.Answer[0].TTL", "300", false),
        ("JSON_ANSWER", "LESS_THAN", "Answer[0].TTL", "301", true),
        ("JSON_ANSWER", "HAS_KEY", "$.Answer[0]", "TTL", true),
        ("JSON_ANSWER", "HAS_KEY", "$.Answer[0]", "ttl", false),
        ("JSON_ANSWER", "NOT_HAS_KEY", "$.Answer[0]", "ttl", true),
        (
            "JSON_ANSWER",
            "HAS_VALUE",
            "$.Answer[0]",
            "192.0.2.10",
            true,
        ),
        (
            "JSON_ANSWER",
            "NOT_HAS_VALUE",
            "$.Answer[0]",
            "192.0.2.10",
            false,
        ),
        (
            "JSON_ANSWER",
            "CONTAINS",
            "$.Answer[0].data",
            "192.0.2",
            true,
        ),
        (
            "JSON_ANSWER",
            "NOT_CONTAINS",
            "$.Answer[0].data",
            "192.0.2",
            false,
        ),
        ("JSON_ANSWER", "IS_NULL", "$.Answer[3]", "", true),
        ("JSON_ANSWER", "NOT_NULL", "$.Answer[3]", "", false),
        ("JSON_ANSWER", "NOT_NULL", "$.Answer[0]", "", true),
        ("JSON_ANSWER", "IS_EMPTY", "$.Authority", "", true),
        ("JSON_ANSWER", "NOT_EMPTY", "$.Answer", "", true),
        ("JSON_ANSWER", "EQUALS", "$[", "", false),
        ("RESPONSE_TIME", "LESS_THAN", "", "5000", true),
        ("RESPONSE_TIME", "GREATER_THAN", "", "5000", false),
    ];
    for protocol in ["UDP", "TCP"] {
        for (source, comparison, property, target, expected) in cases {
            let spec = dns_check(
                &server,
                "www.example.test",
                "A",
                protocol,
                json!({"assertions": [assertion(source, comparison, property, target)]}),
            );
            let result = run(&spec).await;
            assert!(!result.has_errors, "{result:?}");
            assert_eq!(
                result.assertions[0].passed, expected,
                "{protocol} {source} {property} {comparison} {target:?} on {:?}",
                result.assertions[0].actual
            );
            let status = if expected {
                RunStatus::Passed
            } else {
                RunStatus::Failed
            };
            assert_eq!(result.status, status);
        }
    }
}

#[tokio::test]
async fn the_name_server_may_be_a_host_name() {
    let server = start_authority().await;
    let spec = dns_check(
        "localhost",
        "www.example.test",
        "A",
        "UDP",
        json!({"port": server.port()}),
    );
    let result = run(&spec).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
    assert_eq!(result.dns.unwrap().name_server, server.to_string());

    let embedded = dns_check(
        &format!("localhost:{}", server.port()),
        "www.example.test",
        "A",
        "TCP",
        json!({}),
    );
    let result = run(&embedded).await;
    assert_eq!(result.status, RunStatus::Passed, "{result:?}");
}

#[tokio::test]
async fn a_server_that_never_answers_is_a_timeout() {
    let server = mute_server().await.to_string();
    let env = ExecEnv::new(None)
        .unwrap()
        .with_run_timeout(Duration::from_millis(300));
    for protocol in ["UDP", "TCP"] {
        let spec = dns_check(&server, "www.example.test", "A", protocol, json!({}));
        let result = run_check(&spec, &env).await;
        assert_eq!(result.status, RunStatus::Failed);
        assert!(result.has_errors && result.aborted, "{result:?}");
        let error = result.error.unwrap();
        assert_eq!(
            error.kind,
            ErrorKind::Timeout,
            "{protocol}: {}",
            error.message
        );
        assert!(error.message.contains(&server), "{}", error.message);
        assert!(result.dns.is_none());
    }
}

#[tokio::test]
async fn a_closed_tcp_port_is_a_connect_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let spec = dns_check(
        &format!("127.0.0.1:{port}"),
        "www.example.test",
        "A",
        "TCP",
        json!({}),
    );
    let env = ExecEnv::new(None)
        .unwrap()
        .with_run_timeout(Duration::from_secs(5));
    let result = run_check(&spec, &env).await;
    let error = result.error.unwrap();
    assert_eq!(error.kind, ErrorKind::Connect, "{}", error.message);
}

#[tokio::test]
async fn response_time_limits_degrade_and_fail() {
    let server = start_authority().await.to_string();
    let mut spec = dns_check(&server, "www.example.test", "A", "UDP", json!({}));
    let CheckSpec::Dns(d) = &mut spec else {
        unreachable!()
    };
    d.degraded_response_time = Some(0.0);
    let result = run(&spec).await;
    assert_eq!(result.status, RunStatus::Degraded, "{result:?}");
    let CheckSpec::Dns(d) = &mut spec else {
        unreachable!()
    };
    d.max_response_time = Some(0.0);
    let result = run(&spec).await;
    assert_eq!(result.status, RunStatus::Failed);
    assert!(result.has_failures && !result.has_errors);
}

#[test]
fn invalid_definitions_name_the_field() {
    for (doc, field) in [
        (
            json!({"checkType": "DNS", "request": {"query": "a.test", "recordType": "PTR"}}),
            "request.recordType",
        ),
        (
            json!({"checkType": "DNS", "request": {"query": "a.test"}}),
            "request.recordType",
        ),
        (
            json!({"checkType": "DNS", "request": {"recordType": "A"}}),
            "request.query",
        ),
        (
            json!({"checkType": "DNS", "request": {"query": "a.test", "recordType": "A",
                "protocol": "DOH"}}),
            "request.protocol",
        ),
        (
            json!({"checkType": "DNS", "request": {"query": "a.test", "recordType": "A",
                "port": 0}}),
            "request.port",
        ),
        (
            json!({"checkType": "DNS", "request": {"query": "a.test", "recordType": "A",
                "nameServer": "what ever"}}),
            "request.nameServer",
        ),
        (
            json!({"checkType": "DNS", "request": {"query": "a.test", "recordType": "A",
                "assertions": [{"source": "STATUS_CODE", "comparison": "EQUALS"}]}}),
            "request.assertions[0].source",
        ),
    ] {
        assert_eq!(
            CheckSpec::from_document(&doc).unwrap_err().field,
            field,
            "{doc}"
        );
    }
}
