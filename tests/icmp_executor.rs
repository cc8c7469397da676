//! ICMP monitors, end to end: the real `outpost check` binary run as an unprivileged user
//! (uid/gid 65534, no capabilities) inside network namespaces this test creates, so it
//! proves pings work over datagram ICMP sockets without root or CAP_NET_RAW.
//!
//! Each test makes its own namespaces (`op-icmp-<pid>-<n>`); the ones that need a
//! second host join two namespaces with a veth pair (10.251.0.1/30 and .2/30, inside the
//! namespaces only, so no packet ever leaves them). What runs, per case:
//!
//! ```text
//! ip netns add NS; ip -n NS link set lo up
//! ip netns exec NS sysctl -qw net.ipv4.ping_group_range="0 2147483647"   (most cases)
//! ip netns exec NS setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
//!     -- DIR/outpost check DIR/check.json
//! ```
//!
//! They need root, `ip` (iproute2) and `setpriv` (util-linux); without them each test
//! prints a SKIP line and returns. The in-process tests at the end only need ICMP
//! sockets of some kind on loopback (root, or a permissive ping_group_range).

mod require_support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use outpost::executors::{ExecEnv, run_check};
use outpost::model::{CheckSpec, ErrorKind, RunStatus};
use serde_json::{Value, json};

// ---------------------------------------------------------------- the lab

/// Prints a line the test harness does not capture.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Why namespace tests cannot run here, if they cannot.
fn lab_unavailable() -> Option<&'static str> {
    static WHY: OnceLock<Option<String>> = OnceLock::new();
    WHY.get_or_init(|| {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|rest| rest.split_whitespace().nth(1))
            .unwrap_or("?");
        if uid != "0" {
            return Some(format!("not root (effective uid {uid})"));
        }
        for (tool, arg) in [("ip", "-V"), ("setpriv", "--version")] {
            if !Command::new(tool)
                .arg(arg)
                .output()
                .is_ok_and(|o| o.status.success())
            {
                return Some(format!("`{tool}` is missing"));
            }
        }
        let probe = format!("op-icmp-{}-probe", std::process::id());
        let made = Command::new("ip").args(["netns", "add", &probe]).output();
        let _ = Command::new("ip").args(["netns", "del", &probe]).output();
        match made {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!(
                "cannot create network namespaces: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Some(format!("cannot run ip: {e}")),
        }
    })
    .as_deref()
}

macro_rules! require_lab {
    ($name:expr) => {
        if let Some(why) = lab_unavailable() {
            require_support::skip(&format!("{}: {why}", $name));
            return;
        }
    };
}

/// Runs a command that must succeed.
fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace, deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new() -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("op-icmp-{}-{n}", std::process::id());
        sh(&["ip", "netns", "add", &name]);
        let ns = Netns { name };
        sh(&["ip", "-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Lets every group open datagram ICMP sockets in this namespace.
    fn allow_ping_sockets(&self) -> &Netns {
        self.sysctl("net.ipv4.ping_group_range=0 2147483647");
        self
    }

    fn sysctl(&self, setting: &str) {
        sh(&["ip", "netns", "exec", &self.name, "sysctl", "-qw", setting]);
    }

    fn ip(&self, args: &[&str]) {
        let mut all = vec!["ip", "-n", &self.name];
        all.extend_from_slice(args);
        sh(&all);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Two namespaces joined by a veth pair: `here` is 10.251.0.1/30, `peer` 10.251.0.2/30.
/// `here` routes 10.251.0.128/25 to `peer`, which drops it (a blackhole route): those
/// addresses have no host behind them.
struct Pair {
    here: Netns,
    _peer: Netns,
}

const PEER: &str = "10.251.0.2";
const NOBODY_THERE: &str = "10.251.0.129";

impl Pair {
    fn new() -> Pair {
        let here = Netns::new();
        let peer = Netns::new();
        here.ip(&[
            "link", "add", "veth0", "type", "veth", "peer", "name", "veth1", "netns", &peer.name,
        ]);
        here.ip(&["addr", "add", "10.251.0.1/30", "dev", "veth0"]);
        peer.ip(&["addr", "add", "10.251.0.2/30", "dev", "veth1"]);
        here.ip(&["link", "set", "veth0", "up"]);
        peer.ip(&["link", "set", "veth1", "up"]);
        here.ip(&["route", "add", "10.251.0.128/25", "via", PEER]);
        peer.sysctl("net.ipv4.ip_forward=1");
        peer.ip(&["route", "add", "blackhole", "10.251.0.128/25"]);
        here.allow_ping_sockets();
        Pair { here, _peer: peer }
    }
}

/// The binary and check files where uid 65534 can read them (the target directory may
/// not be reachable for it).
struct Files {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Files {
    fn new() -> Files {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut files = Files {
            dir,
            bin: PathBuf::new(),
        };
        files.bin = files.link(Path::new(env!("CARGO_BIN_EXE_outpost")), "outpost");
        files
    }

    /// Makes the executable `built` available as `name` in the directory.
    fn link(&self, built: &Path, name: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(name);
        if std::fs::hard_link(built, &path).is_err() {
            std::fs::copy(built, &path).unwrap();
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn check_file(&self, doc: &Value) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = self.dir.path().join(format!(
            "check-{}.json",
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, doc.to_string()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        path
    }

    /// `outpost check` of `doc` in `ns` as uid/gid 65534 without any capability.
    fn check_as_nobody(&self, ns: &Netns, doc: &Value) -> (Output, Value) {
        let file = self.check_file(doc);
        let output = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .args([
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
            ])
            .args(["--inh-caps=-all", "--"])
            .arg(&self.bin)
            .arg("check")
            .arg(&file)
            .env("LOG_LEVEL", "WARN")
            .env_remove("USE_OS_DNS_RESOLVER")
            .output()
            .unwrap();
        let result = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (output, result)
    }
}

fn icmp(hostname: &str, extra: Value) -> Value {
    let mut doc = json!({"checkType": "ICMP", "name": "ping",
        "request": {"hostname": hostname, "pingCount": 3}});
    for (k, v) in extra.as_object().unwrap() {
        if k == "request" {
            for (rk, rv) in v.as_object().unwrap() {
                doc["request"][rk] = rv.clone();
            }
        } else {
            doc[k] = v.clone();
        }
    }
    doc
}

/// Every statistic is there, ordered as statistics must be, and matches the rtts.
fn assert_full_latency(result: &Value, packets: usize) {
    let icmp = &result["icmp"];
    assert_eq!(icmp["packetsSent"], packets, "{result}");
    assert_eq!(icmp["packetsReceived"], packets, "{result}");
    assert_eq!(icmp["packetLoss"], 0.0, "{result}");
    let rtts: Vec<f64> = icmp["rtts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_f64().unwrap())
        .collect();
    assert_eq!(rtts.len(), packets);
    let l = &icmp["latency"];
    let (avg, min, max) = (
        l["avg"].as_f64().unwrap(),
        l["min"].as_f64().unwrap(),
        l["max"].as_f64().unwrap(),
    );
    assert!(l["stdDev"].as_f64().unwrap() >= 0.0, "{l}");
    assert!(min <= avg && avg <= max, "{l}");
    assert_eq!(min, rtts.iter().copied().fold(f64::INFINITY, f64::min));
    assert_eq!(max, rtts.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    assert_eq!(result["responseTime"], l["avg"]);
}

// ---------------------------------------------------------------- namespace tests

#[test]
fn datagram_sockets_ping_without_root_or_capabilities() {
    require_lab!("datagram_sockets_ping_without_root_or_capabilities");
    let ns = Netns::new();
    ns.allow_ping_sockets();
    let files = Files::new();
    let (output, result) = files.check_as_nobody(&ns, &icmp("127.0.0.1", json!({})));
    assert_eq!(output.status.code(), Some(0), "{result}");
    assert_eq!(result["checkType"], "ICMP");
    assert_eq!(result["status"], "PASSED");
    assert_eq!(result["hasErrors"], false);
    assert_eq!(result["icmp"]["hostname"], "127.0.0.1");
    assert_eq!(result["icmp"]["address"], "127.0.0.1");
    assert_full_latency(&result, 3);
}

#[test]
fn without_ping_group_range_or_cap_net_raw_the_error_names_both() {
    require_lab!("without_ping_group_range_or_cap_net_raw_the_error_names_both");
    let ns = Netns::new();
    ns.sysctl("net.ipv4.ping_group_range=1 0");
    let files = Files::new();
    let (output, result) = files.check_as_nobody(&ns, &icmp("127.0.0.1", json!({})));
    assert_eq!(output.status.code(), Some(1), "{result}");
    assert_eq!(result["status"], "FAILED");
    assert_eq!(result["hasErrors"], true);
    assert_eq!(result["error"]["kind"], "PERMISSION");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("net.ipv4.ping_group_range"), "{message}");
    assert!(message.contains("CAP_NET_RAW"), "{message}");
    assert!(result.get("icmp").is_none(), "{result}");
}

#[test]
fn a_host_across_a_veth_link_answers() {
    require_lab!("a_host_across_a_veth_link_answers");
    let pair = Pair::new();
    let files = Files::new();
    let doc = icmp(PEER, json!({"request": {"pingCount": 5}}));
    let (output, result) = files.check_as_nobody(&pair.here, &doc);
    assert_eq!(output.status.code(), Some(0), "{result}");
    assert_eq!(result["status"], "PASSED");
    assert_full_latency(&result, 5);
}

#[test]
fn an_address_with_no_host_behind_it_loses_every_packet() {
    require_lab!("an_address_with_no_host_behind_it_loses_every_packet");
    let pair = Pair::new();
    let files = Files::new();
    // A short maxResponseTime keeps the per-packet wait (and the test) short.
    let doc = icmp(
        NOBODY_THERE,
        json!({"degradedResponseTime": 500, "maxResponseTime": 1000}),
    );
    let (output, result) = files.check_as_nobody(&pair.here, &doc);
    assert_eq!(output.status.code(), Some(1), "{result}");
    assert_eq!(result["status"], "FAILED");
    assert_eq!(result["hasFailures"], true);
    assert_eq!(
        result["hasErrors"], false,
        "all lost is a failure, not an error"
    );
    let summary = &result["icmp"];
    assert_eq!(summary["packetsSent"], 3);
    assert_eq!(summary["packetsReceived"], 0);
    assert_eq!(summary["packetLoss"], 100.0);
    assert_eq!(summary["rtts"], json!([null, null, null]));
    assert!(summary.get("latency").is_none(), "{summary}");
    assert!(result["responseTime"].is_null());
}

#[test]
fn a_destination_the_kernel_will_not_send_to_is_a_connect_error() {
    require_lab!("a_destination_the_kernel_will_not_send_to_is_a_connect_error");
    let ns = Netns::new();
    ns.allow_ping_sockets();
    ns.ip(&["route", "add", "blackhole", "10.251.9.0/24"]);
    let files = Files::new();
    let (output, result) = files.check_as_nobody(&ns, &icmp("10.251.9.1", json!({})));
    assert_eq!(output.status.code(), Some(1), "{result}");
    assert_eq!(result["hasErrors"], true);
    assert_eq!(result["error"]["kind"], "CONNECT");
    assert_eq!(result["icmp"]["sendErrors"], 3);
    assert_eq!(result["icmp"]["packetLoss"], 100.0);
}

#[test]
fn latency_packet_loss_and_json_assertions_pass_and_fail() {
    require_lab!("latency_packet_loss_and_json_assertions_pass_and_fail");
    let pair = Pair::new();
    let files = Files::new();
    let a = |source: &str, property: &str, comparison: &str, target: &str| {
        json!({"source": source, "property": property, "comparison": comparison,
            "target": target})
    };
    // A reply slower than the per-packet wait (at most maxResponseTime) is lost, so
    // every latency here is below 20000 ms by construction.
    let holding = vec![
        a("LATENCY", "avg", "LESS_THAN", "20000"),
        a("LATENCY", "max", "LESS_THAN", "20000"),
        a("LATENCY", "stdDev", "LESS_THAN", "20000"),
        a("PACKET_LOSS", "", "EQUALS", "0"),
        a("JSON_RESPONSE", "$.packetsReceived", "EQUALS", "3"),
        a("JSON_RESPONSE", "$.address", "EQUALS", PEER),
        a("JSON_RESPONSE", "$.latency.min", "NOT_NULL", ""),
    ];
    let failing = [
        a("LATENCY", "min", "GREATER_THAN", "20000"),
        a("PACKET_LOSS", "", "GREATER_THAN", "50"),
        a("JSON_RESPONSE", "$.packetsReceived", "LESS_THAN", "3"),
        a("JSON_RESPONSE", "$.rtts[0]", "IS_NULL", ""),
    ];

    let doc = icmp(PEER, json!({"request": {"assertions": holding}}));
    let (output, result) = files.check_as_nobody(&pair.here, &doc);
    assert_eq!(output.status.code(), Some(0), "{result}");
    assert_eq!(result["status"], "PASSED");
    let outcomes = result["assertions"].as_array().unwrap();
    assert_eq!(outcomes.len(), holding.len());
    assert!(outcomes.iter().all(|o| o["passed"] == true), "{result}");
    assert_eq!(outcomes[3]["actual"], "0");
    assert_eq!(outcomes[4]["actual"], "3");

    let mut all = holding.clone();
    all.extend(failing.iter().cloned());
    let doc = icmp(PEER, json!({"request": {"assertions": all}}));
    let (output, result) = files.check_as_nobody(&pair.here, &doc);
    assert_eq!(output.status.code(), Some(1), "{result}");
    assert_eq!(result["status"], "FAILED");
    assert_eq!(result["hasFailures"], true);
    assert_eq!(result["hasErrors"], false);
    let passed: Vec<bool> = result["assertions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["passed"].as_bool().unwrap())
        .collect();
    let mut expected = vec![true; holding.len()];
    expected.extend(vec![false; failing.len()]);
    assert_eq!(passed, expected, "{result}");

    // Every reply takes longer than 0 ms: a degraded threshold of 0 degrades the run.
    let doc = icmp(PEER, json!({"degradedResponseTime": 0}));
    let (output, result) = files.check_as_nobody(&pair.here, &doc);
    assert_eq!(output.status.code(), Some(1), "{result}");
    assert_eq!(result["status"], "DEGRADED");
    assert_eq!(result["isDegraded"], true);
    assert_eq!(result["hasFailures"], false);
}

#[test]
fn ipv6_pings_loopback_over_datagram_sockets() {
    require_lab!("ipv6_pings_loopback_over_datagram_sockets");
    let ns = Netns::new();
    ns.allow_ping_sockets();
    if !Path::new("/proc/sys/net/ipv6").exists() {
        say("SKIP ipv6_pings_loopback_over_datagram_sockets: the kernel has no IPv6");
        return;
    }
    let files = Files::new();
    let explicit = icmp("::1", json!({"request": {"ipFamily": "IPv6"}}));
    let (output, result) = files.check_as_nobody(&ns, &explicit);
    assert_eq!(output.status.code(), Some(0), "{result}");
    assert_eq!(result["icmp"]["address"], "::1");
    assert_full_latency(&result, 3);
    // A bracketed IPv6 address without ipFamily is pinged over IPv6 too.
    let (output, result) = files.check_as_nobody(&ns, &icmp("[::1]", json!({})));
    assert_eq!(output.status.code(), Some(0), "{result}");
    assert_eq!(result["icmp"]["address"], "::1");
}

#[test]
fn a_name_that_does_not_resolve_is_a_dns_error() {
    require_lab!("a_name_that_does_not_resolve_is_a_dns_error");
    // The namespace has only loopback: no name server is reachable from it.
    let ns = Netns::new();
    ns.allow_ping_sockets();
    let files = Files::new();
    let (output, result) = files.check_as_nobody(&ns, &icmp("nothing.example.test", json!({})));
    assert_eq!(output.status.code(), Some(1), "{result}");
    assert_eq!(result["hasErrors"], true);
    assert_eq!(result["error"]["kind"], "DNS", "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing.example.test"),
        "{result}"
    );
}

// ---------------------------------------------------------------- in-process tests

fn spec(doc: Value) -> CheckSpec {
    CheckSpec::from_document(&doc).unwrap()
}

/// Six runs of five pings each to one host at once: each must get exactly its own
/// replies (a shared sequence number would lose or steal some).
async fn six_concurrent_runs(env: &ExecEnv, host: &str) -> Result<(), String> {
    let check = spec(icmp(host, json!({"request": {"pingCount": 5}})));
    let runs = futures_util::future::join_all((0..6).map(|_| run_check(&check, env))).await;
    if let Some(e) = runs[0]
        .error
        .as_ref()
        .filter(|e| e.kind == ErrorKind::Permission)
    {
        return Err(e.message.clone());
    }
    for r in &runs {
        assert_eq!(r.status, RunStatus::Passed, "{r:?}");
        let icmp = r.icmp.as_ref().unwrap();
        assert_eq!(icmp.packets_received, 5, "{icmp:?}");
        assert!(icmp.rtts.iter().all(Option::is_some), "{icmp:?}");
    }
    Ok(())
}

/// Runs a 5-echo check of `host` and checks every reported round trip against the wall
/// time of the whole run: above zero, and no longer than the run (a round trip read off
/// clocks that disagree, or timed from the wrong moment, would break one or the other).
async fn round_trips_within_the_run(env: &ExecEnv, host: &str) -> Result<(), String> {
    let check = spec(icmp(host, json!({"request": {"pingCount": 5}})));
    let started = std::time::Instant::now();
    let r = run_check(&check, env).await;
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    if let Some(e) = r.error.as_ref().filter(|e| e.kind == ErrorKind::Permission) {
        return Err(e.message.clone());
    }
    assert_eq!(r.status, RunStatus::Passed, "{r:?}");
    let icmp = r.icmp.as_ref().unwrap();
    assert_eq!(icmp.rtts.len(), 5, "{icmp:?}");
    for rtt in &icmp.rtts {
        let rtt = rtt.unwrap_or_else(|| panic!("a lost echo: {icmp:?}"));
        assert!(
            rtt > 0.0 && rtt <= wall_ms,
            "rtt {rtt} ms, run {wall_ms} ms: {icmp:?}"
        );
    }
    let latency = icmp.latency.unwrap();
    assert!(latency.max <= wall_ms && latency.min > 0.0, "{latency:?}");
    Ok(())
}

/// In this process, with whatever ICMP socket it may open (raw when run as root).
#[tokio::test]
async fn loopback_round_trips_are_above_zero_and_within_the_run() {
    let env = ExecEnv::new(None).unwrap();
    for host in ["127.0.0.1", "::1"] {
        if let Err(why) = round_trips_within_the_run(&env, host).await {
            say(&format!(
                "SKIP loopback_round_trips_are_above_zero_and_within_the_run {host}: {why}"
            ));
        }
    }
}

/// In this process, with whatever ICMP socket it may open (raw when run as root).
#[tokio::test]
async fn concurrent_runs_to_one_host_each_get_all_their_replies() {
    let env = ExecEnv::new(None).unwrap();
    if let Err(why) = six_concurrent_runs(&env, "127.0.0.1").await {
        say(&format!(
            "SKIP concurrent_runs_to_one_host_each_get_all_their_replies: {why}"
        ));
    }
}

/// The body of [`concurrent_runs_share_one_datagram_socket`], which runs this test
/// binary as uid 65534 without capabilities inside a namespace: there only a datagram
/// socket can be opened, and the kernel rewrites every echo identifier.
#[tokio::test]
#[ignore = "run inside a namespace by concurrent_runs_share_one_datagram_socket"]
async fn concurrent_runs_inside_a_namespace() {
    let env = ExecEnv::new(None).unwrap();
    six_concurrent_runs(&env, "127.0.0.1").await.unwrap();
    six_concurrent_runs(&env, "::1").await.unwrap();
    round_trips_within_the_run(&env, "127.0.0.1").await.unwrap();
    round_trips_within_the_run(&env, "::1").await.unwrap();
}

#[test]
fn concurrent_runs_share_one_datagram_socket() {
    require_lab!("concurrent_runs_share_one_datagram_socket");
    let ns = Netns::new();
    ns.allow_ping_sockets();
    let files = Files::new();
    let exe = files.link(&std::env::current_exe().unwrap(), "icmp_executor");
    let output = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .args(["--inh-caps=-all", "--"])
        .arg(&exe)
        .args(["--exact", "concurrent_runs_inside_a_namespace", "--ignored"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
