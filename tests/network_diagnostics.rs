//! Network diagnostics of failed URL and API checks: the real binary inside a network
//! namespace made by the test, joined by a veth link to a second namespace that routes
//! 198.51.100.0/24 (TEST-NET-2) to an `unreachable` route. A check of 198.51.100.7 fails
//! with "host unreachable" (a CONNECT error), which triggers a packet capture of the
//! attempt run again and a traceroute. No packet leaves the two namespaces.
//!
//! - as root: the result lists capture.pcap (parsed back with pcap-file, with packets to
//!   the target) and traceroute.json (hops, the router among them), written by
//!   `--artifacts-dir`;
//! - without NET_RAW (uid 65534, no capabilities): no artifacts, and the result says
//!   diagnostics were unavailable and why.
//!
//! Needs root (prints a SKIP line otherwise).

mod netns_support;
mod require_support;

use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use netns_support::{Netns, bin, can_run, link};
use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;
use serde_json::{Value, json};

/// Unreachable behind the router namespace.
const TARGET: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
/// The router's address on the link.
const ROUTER: &str = "192.0.2.2";

/// The checking namespace and the router namespace it routes TEST-NET-2 through.
fn topology() -> (Netns, Netns) {
    let (host, router) = (Netns::new(), Netns::new());
    link(&host, "192.0.2.1/24", &router, "192.0.2.2/24");
    host.run(&["ip", "route", "add", "198.51.100.0/24", "via", ROUTER]);
    router.run(&[
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
        // Answer every probe: the default limit would swallow the traceroute's after
        // the check's own "unreachable" answers.
        "net.ipv4.icmp_ratelimit=0",
    ]);
    router.run(&["ip", "route", "add", "unreachable", &format!("{TARGET}/32")]);
    (host, router)
}

fn url_check() -> Value {
    json!({"checkType": "URL", "name": "down", "request": {
        "url": format!("http://{TARGET}:8080/health")}})
}

/// A directory every user can read (for a process that dropped root).
fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `outpost check` of `doc` in `ns` (through `wrapper` if given); exit code and result.
fn check(
    ns: &Netns,
    program: &Path,
    wrapper: &[&str],
    doc: &Value,
    extra: &[&str],
) -> (i32, Value) {
    let dir = open_dir();
    let file = dir.path().join("check.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = ns.command(first);
            c.args(rest).arg(program);
            c
        }
        None => ns.command(&program.to_string_lossy()),
    };
    let out = cmd
        .arg("check")
        .arg(&file)
        .args(extra)
        .env("LOG_LEVEL", "WARN")
        .env_remove("NETWORK_DIAGNOSTICS")
        .output()
        .unwrap();
    let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no result ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), result)
}

#[test]
fn a_network_failure_carries_a_packet_capture_and_a_traceroute() {
    if !can_run("a_network_failure_carries_a_packet_capture_and_a_traceroute") {
        return;
    }
    let (host, _router) = topology();
    let out = tempfile::tempdir().unwrap();
    let artifacts = out.path().join("artifacts");
    let artifacts_arg = artifacts.to_string_lossy().into_owned();
    let (code, r) = check(
        &host,
        Path::new(bin()),
        &[],
        &url_check(),
        &["--artifacts-dir", &artifacts_arg],
    );
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["error"]["kind"], "CONNECT", "{r:#}");
    assert_eq!(r["diagnostics"]["available"], true, "{r:#}");
    assert_eq!(r["diagnostics"]["target"], TARGET.to_string(), "{r:#}");

    let listed: Vec<(String, u64)> = r["artifacts"]
        .as_array()
        .unwrap_or_else(|| panic!("no artifacts: {r:#}"))
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_owned(),
                a["size"].as_u64().unwrap(),
            )
        })
        .collect();
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["capture.pcap", "traceroute.json"], "{r:#}");
    for (name, size) in &listed {
        let written = std::fs::metadata(artifacts.join(name)).unwrap().len();
        assert_eq!(written, *size, "{name}");
    }

    // The capture parses as pcap and holds the attempt's packets to the target.
    let pcap = std::fs::read(artifacts.join("capture.pcap")).unwrap();
    let mut reader = PcapReader::new(pcap.as_slice()).unwrap();
    assert_eq!(reader.header().datalink, DataLink::RAW);
    let mut to_target = 0;
    let mut packets = 0;
    while let Some(packet) = reader.next_packet() {
        let packet = packet.unwrap();
        packets += 1;
        let data = &packet.data;
        if data.len() >= 20 && data[0] >> 4 == 4 && data[16..20] == TARGET.octets() {
            to_target += 1;
        }
    }
    assert!(to_target >= 1, "{packets} packets, none to {TARGET}");

    // The traceroute lists hops; the router answered for the first one.
    let route: Value =
        serde_json::from_slice(&std::fs::read(artifacts.join("traceroute.json")).unwrap()).unwrap();
    assert_eq!(route["target"], TARGET.to_string());
    let hops = route["hops"].as_array().unwrap();
    assert_eq!(hops[0]["ttl"], 1, "{route:#}");
    assert_eq!(hops[0]["addresses"], json!([ROUTER]), "{route:#}");
}

#[test]
fn api_checks_are_diagnosed_too() {
    if !can_run("api_checks_are_diagnosed_too") {
        return;
    }
    // A topology of its own: the router's ICMP error budget is per namespace.
    let (host, _router) = topology();
    // Listed only: no --artifacts-dir.
    let (code, r) = check(
        &host,
        Path::new(bin()),
        &[],
        &json!({"checkType": "API", "name": "down", "request": {
            "method": "POST", "url": format!("http://{TARGET}:8080/orders"), "body": "{}",
            "bodyType": "JSON"}}),
        &[],
    );
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["diagnostics"]["available"], true, "{r:#}");
    assert_eq!(r["artifacts"].as_array().map(Vec::len), Some(2), "{r:#}");
}

#[test]
fn a_dns_failure_captures_the_lookup_and_traces_the_name_server() {
    if !can_run("a_dns_failure_captures_the_lookup_and_traces_the_name_server") {
        return;
    }
    let (host, _router) = topology();
    // The only name server sits behind the router, where nothing answers.
    host.set_etc_file(
        "resolv.conf",
        "nameserver 198.51.100.53\noptions timeout:1 attempts:1\n",
    );
    host.set_hosts("127.0.0.1 localhost\n");
    let out = tempfile::tempdir().unwrap();
    let artifacts = out.path().join("artifacts");
    let artifacts_arg = artifacts.to_string_lossy().into_owned();
    let (code, r) = check(
        &host,
        Path::new(bin()),
        &[],
        &json!({"checkType": "URL", "name": "dns", "request": {
            "url": "http://service.example.test/"}}),
        &["--artifacts-dir", &artifacts_arg],
    );
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["error"]["kind"], "DNS", "{r:#}");
    assert_eq!(r["diagnostics"]["available"], true, "{r:#}");
    assert_eq!(r["diagnostics"]["target"], "198.51.100.53", "{r:#}");
    let pcap = std::fs::read(artifacts.join("capture.pcap")).unwrap();
    let mut reader = PcapReader::new(pcap.as_slice()).unwrap();
    let mut queries = 0;
    while let Some(packet) = reader.next_packet() {
        let data = packet.unwrap().data;
        // UDP to the name server's port 53.
        if data.len() >= 24
            && data[9] == 17
            && data[16..20] == [198, 51, 100, 53]
            && data[22..24] == 53u16.to_be_bytes()
        {
            queries += 1;
        }
    }
    assert!(queries >= 1, "no DNS query in the capture");
    let route: Value =
        serde_json::from_slice(&std::fs::read(artifacts.join("traceroute.json")).unwrap()).unwrap();
    assert_eq!(route["target"], "198.51.100.53", "{route:#}");
}

#[test]
fn without_net_raw_the_result_says_diagnostics_were_unavailable() {
    if !can_run("without_net_raw_the_result_says_diagnostics_were_unavailable") {
        return;
    }
    let (host, _router) = topology();
    // The binary where the unprivileged user can run it.
    let dir = open_dir();
    let program = dir.path().join("outpost");
    std::fs::copy(bin(), &program).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, r) = check(
        &host,
        &program,
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ],
        &url_check(),
        &[],
    );
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["error"]["kind"], "CONNECT", "{r:#}");
    assert_eq!(r["diagnostics"]["available"], false, "{r:#}");
    let reason = r["diagnostics"]["reason"].as_str().unwrap();
    assert!(reason.contains("NET_RAW"), "{reason}");
    assert!(r.get("artifacts").is_none(), "{r:#}");
}
