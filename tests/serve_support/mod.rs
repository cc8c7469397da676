//! A real `outpost serve` child process on 127.0.0.1 for end-to-end tests.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use serde_json::Value;

/// A running `outpost serve`, killed when dropped.
pub struct Serve {
    child: Child,
    pub base: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// Starts `outpost serve` on 127.0.0.1:0 in `dir` and waits for its address (it has
    /// written `dir/credentials.json` by then).
    pub fn start(dir: &Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_outpost"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .env("LOG_FORMAT", "json")
            .env("LOG_LEVEL", "INFO")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start outpost serve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent
                    && let Ok(v) = serde_json::from_str::<Value>(&line)
                    && v["message"] == "control plane listening"
                {
                    let _ = tx.send(v["addr"].as_str().unwrap_or_default().to_owned());
                    sent = true;
                }
            }
        });
        let addr = rx.recv().expect("outpost serve logs its address");
        Serve {
            child,
            base: format!("http://{addr}"),
        }
    }

    /// SIGKILL, no chance to flush anything.
    #[allow(dead_code)]
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert!(!status.success());
    }
}
