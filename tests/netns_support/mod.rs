//! Network namespaces made by a test (needs root and iproute2): loopback-only ones with
//! IPv6 switched off, and pairs joined by a veth link. Everything they hold is removed on
//! drop. Traffic never leaves them: they have no link to the host's network.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long an awaited event (a log line) may take.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(60);

static NEXT: AtomicU32 = AtomicU32::new(0);

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_outpost")
}

/// Whether namespace tests can run here; prints a SKIP line naming `test` if not.
pub fn can_run(test: &str) -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let ip = Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !root || !ip {
        crate::require_support::skip(&format!(
            "{test}: needs root and iproute2 to create network namespaces"
        ));
        return false;
    }
    true
}

fn unique(prefix: &str) -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}x{n}", std::process::id() % 100_000)
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run a command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A network namespace with `lo` up, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new() -> Netns {
        let name = unique("outpost");
        run(Command::new("ip").args(["netns", "add", &name]));
        let ns = Netns { name };
        ns.run(&["ip", "link", "set", "lo", "up"]);
        ns
    }

    /// `program args...` inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]);
        cmd
    }

    /// Runs `args` inside the namespace and asserts it succeeded.
    pub fn run(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(args[0]);
        cmd.args(&args[1..]);
        run(&mut cmd)
    }

    /// Switches IPv6 off (`::1` disappears from `lo`).
    pub fn disable_ipv6(&self) {
        self.run(&[
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.lo.disable_ipv6=1",
        ]);
    }

    /// Makes `/etc/hosts` read `contents` for commands run in the namespace (`ip netns
    /// exec` bind-mounts `/etc/netns/<name>/hosts`).
    pub fn set_hosts(&self, contents: &str) {
        self.set_etc_file("hosts", contents);
    }

    /// Makes `/etc/<name>` read `contents` for commands run in the namespace (e.g.
    /// `resolv.conf`).
    pub fn set_etc_file(&self, name: &str, contents: &str) {
        let dir = Path::new("/etc/netns").join(&self.name);
        std::fs::create_dir_all(&dir).expect("create /etc/netns/<ns>");
        std::fs::write(dir.join(name), contents).expect("write the file");
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(&self.name));
    }
}

/// Joins `a` (address `a_cidr`) and `b` (address `b_cidr`) with a veth link.
pub fn link(a: &Netns, a_cidr: &str, b: &Netns, b_cidr: &str) {
    let (va, vb) = (unique("va"), unique("vb"));
    run(Command::new("ip").args(["link", "add", &va, "type", "veth", "peer", "name", &vb]));
    run(Command::new("ip").args(["link", "set", &va, "netns", &a.name]));
    run(Command::new("ip").args(["link", "set", &vb, "netns", &b.name]));
    a.run(&["ip", "addr", "add", a_cidr, "dev", &va]);
    b.run(&["ip", "addr", "add", b_cidr, "dev", &vb]);
    a.run(&["ip", "link", "set", &va, "up"]);
    b.run(&["ip", "link", "set", &vb, "up"]);
}

/// A process started by the test, killed (by its id) on drop, whose output lines can be
/// awaited.
pub struct Daemon {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Daemon {
    pub fn spawn(mut cmd: Command) -> Daemon {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn a daemon");
        let (tx, lines) = mpsc::channel();
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
        }
        Daemon {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits until a line containing `needle` is printed; panics with the output so far
    /// if it does not come within [`EVENT_TIMEOUT`] or the process ends first.
    pub fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + EVENT_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(e) => panic!(
                    "no line with {needle:?} ({e:?}); output so far:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
