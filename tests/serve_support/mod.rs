//! A real `outpost serve` child process on 127.0.0.1 for end-to-end tests.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};

use serde_json::Value;

/// A running `outpost serve`, killed when dropped.
pub struct Serve {
    child: Child,
    pub base: String,
    dir: std::path::PathBuf,
    /// Every line the process wrote to stderr so far (JSON log lines).
    #[allow(dead_code)]
    pub logs: Arc<Mutex<Vec<String>>>,
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
    #[allow(dead_code)]
    pub fn start(dir: &Path) -> Serve {
        Serve::start_with_env(dir, &[])
    }

    /// [`Serve::start`] with extra environment variables (e.g. OUTPOST_SMTP_URL).
    pub fn start_with_env(dir: &Path, env: &[(&str, &str)]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_outpost"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .envs(env.iter().copied())
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
        let logs = Arc::new(Mutex::new(Vec::new()));
        let kept = logs.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                kept.lock().unwrap().push(line.clone());
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
            dir: dir.to_owned(),
            logs,
        }
    }

    /// The credentials of the bootstrap account (`credentials.json`: apiKey,
    /// accountId, privateLocation, agentKey).
    #[allow(dead_code)]
    pub fn credentials(&self) -> Value {
        let text = std::fs::read_to_string(self.dir.join("credentials.json"))
            .expect("outpost serve wrote credentials.json");
        serde_json::from_str(&text).expect("credentials.json is JSON")
    }

    /// SIGKILL, no chance to flush anything.
    #[allow(dead_code)]
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert!(!status.success());
    }
}
