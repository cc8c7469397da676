//! A real SMTP server for the e-mail tests: aiosmtpd (PyPI) in a virtualenv under
//! `<target>/tmp/pyenv`, installed on first use with pip (the only step that needs the
//! network; later runs reuse it). Without python3, or when the install fails, `start`
//! prints a SKIP line and returns None.
//!
//! The server runs a small handler script: it prints one JSON line per message (the
//! envelope, the authenticated login, the decoded subject, headers (`List-Unsubscribe`
//! and `List-Unsubscribe-Post` among them) and plain-text body)
//! and per refused attempt, which the test reads as events from a channel. Recipients
//! whose address starts with `refused` are answered 550 (event `rcpt_refused`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use serde_json::Value;
use tokio::sync::mpsc;

/// The handler: `python sink.py PORT`; env SINK_USER/SINK_PASSWORD require AUTH with
/// those credentials, SINK_FAIL_FIRST=N answers 451 to the first N messages.
const SINK_PY: &str = r#"
import email, email.policy, json, logging, os, sys, time, warnings
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

port = int(sys.argv[1])
user = os.environ.get("SINK_USER")
password = os.environ.get("SINK_PASSWORD")
fail_first = int(os.environ.get("SINK_FAIL_FIRST", "0"))

def header(msg, name):
    value = msg[name]
    return None if value is None else str(value)

def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

class Handler:
    def __init__(self):
        self.seen = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.lower().startswith("refused"):
            emit({"event": "rcpt_refused", "address": address})
            return "550 5.1.1 Mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.seen += 1
        if self.seen <= fail_first:
            emit({"event": "refused", "attempt": self.seen})
            return "451 4.3.0 Try again later"
        raw = envelope.original_content or envelope.content
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        part = msg.get_body(preferencelist=("plain",))
        login = getattr(session.auth_data, "login", None)
        login = login.decode() if login else None
        emit({"event": "message", "received_at_ms": int(time.time() * 1000),
              "mail_from": envelope.mail_from,
              "rcpt_tos": envelope.rcpt_tos, "login": login,
              "subject": str(msg["subject"]), "from": str(msg["from"]), "to": str(msg["to"]),
              "message_id": str(msg["message-id"]), "content_type": msg.get_content_type(),
              "list_unsubscribe": header(msg, "list-unsubscribe"),
              "list_unsubscribe_post": header(msg, "list-unsubscribe-post"),
              "body": part.get_content() if part is not None else None})
        return "250 2.0.0 OK"

def authenticator(server, session, envelope, mechanism, auth_data):
    ok = (isinstance(auth_data, LoginPassword)
          and auth_data.login.decode() == user and auth_data.password.decode() == password)
    return AuthResult(success=ok, auth_data=auth_data if ok else None)

kwargs = {}
if user:
    kwargs = dict(authenticator=authenticator, auth_required=True, auth_require_tls=False)
controller = Controller(Handler(), hostname="127.0.0.1", port=port, **kwargs)
controller.start()
emit({"event": "ready", "port": port})
sys.stdin.read()
controller.stop()
"#;

static INSTALL: Mutex<()> = Mutex::new(());

fn has_aiosmtpd(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import aiosmtpd"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The virtualenv's python with aiosmtpd, installing it if needed; None after a SKIP
/// line when that is not possible.
pub fn python() -> Option<PathBuf> {
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let venv = tmp.join("pyenv");
    let python = venv.join("bin").join("python");
    if has_aiosmtpd(&python) {
        return Some(python);
    }
    // Built aside and renamed into place, so that a failed install leaves nothing.
    let building = tmp.join(format!("pyenv.building-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    let created = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&building)
        .stdin(Stdio::null())
        .output();
    match created {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            crate::require_support::skip(&format!(
                "python3 -m venv failed: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ));
            return None;
        }
        Err(e) => {
            crate::require_support::skip(&format!(
                "python3 is not available ({e}); aiosmtpd cannot be installed"
            ));
            return None;
        }
    }
    let out = Command::new(building.join("bin").join("python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "aiosmtpd",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !out.status.success() {
        crate::require_support::skip(&format!(
            "pip install aiosmtpd failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
        let _ = std::fs::remove_dir_all(&building);
        return None;
    }
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::rename(&building, &venv).unwrap();
    has_aiosmtpd(&python).then_some(python)
}

/// One message the server accepted.
#[derive(Debug, Clone)]
pub struct Mail(pub Value);

impl Mail {
    pub fn subject(&self) -> &str {
        self.0["subject"].as_str().unwrap()
    }
    pub fn body(&self) -> &str {
        self.0["body"].as_str().unwrap()
    }
    /// A header the handler reports (`list_unsubscribe`, ...), if the message had it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.0[name].as_str()
    }
    pub fn rcpt_tos(&self) -> Vec<String> {
        self.0["rcpt_tos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }
}

/// A running aiosmtpd on 127.0.0.1, killed when dropped.
pub struct SmtpSink {
    child: Child,
    pub port: u16,
    /// Every JSON line of the handler after "ready".
    rx: mpsc::UnboundedReceiver<Value>,
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Options of the sink.
#[derive(Debug, Default, Clone)]
pub struct SinkOptions {
    /// Require AUTH with (user, password).
    pub auth: Option<(String, String)>,
    /// Answer 451 to this many messages first.
    pub fail_first: u32,
}

impl SmtpSink {
    /// Starts the server and waits until it accepts connections; None (after a SKIP
    /// line) when aiosmtpd cannot be installed.
    pub async fn start(options: SinkOptions) -> Option<SmtpSink> {
        let python = tokio::task::spawn_blocking(python).await.unwrap()?;
        let script = Path::new(env!("CARGO_TARGET_TMPDIR")).join("smtp_sink.py");
        std::fs::write(&script, SINK_PY).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = Command::new(python);
        cmd.arg(&script)
            .arg(port.to_string())
            .env("SINK_FAIL_FIRST", options.fail_first.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some((user, password)) = &options.auth {
            cmd.env("SINK_USER", user).env("SINK_PASSWORD", password);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                    Err(_) => eprintln!("smtp sink: {line}"),
                }
            }
        });
        let ready = rx.recv().await.expect("the SMTP sink starts");
        assert_eq!(ready["event"], "ready", "{ready}");
        Some(SmtpSink { child, port, rx })
    }

    /// `smtp://127.0.0.1:PORT`, with credentials when given.
    pub fn url(&self, credentials: Option<(&str, &str)>) -> String {
        match credentials {
            Some((u, p)) => format!("smtp://{u}:{p}@127.0.0.1:{}", self.port),
            None => format!("smtp://127.0.0.1:{}", self.port),
        }
    }

    /// The next line of the handler (a message or a refusal); waits for it.
    pub async fn next_event(&mut self) -> Value {
        self.rx.recv().await.expect("the SMTP sink is running")
    }

    /// The next accepted message; refusals before it are skipped.
    pub async fn next(&mut self) -> Mail {
        loop {
            let v = self.next_event().await;
            if v["event"] == "message" {
                return Mail(v);
            }
        }
    }

    /// Asserts that nothing more arrived so far.
    pub fn assert_quiet(&mut self) {
        if let Ok(v) = self.rx.try_recv() {
            panic!("unexpected SMTP traffic: {v}");
        }
    }
}
