//! `outpost deploy` end to end: the real binary deploys project files (YAML, then TOML
//! through the environment) to a real `outpost serve`, prints `<logical id> <ping URL>`
//! lines, and a ping to a printed URL is recorded; bad files exit 2, an unreachable
//! service exits 1.

use std::process::{Command, Output, Stdio};

use serde_json::Value;

mod serve_support;

use serve_support::Serve;

/// Runs `outpost deploy ARGS` with `env` set (and no proxy settings).
fn deploy(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_outpost"));
    cmd.arg("deploy").args(args).stdin(Stdio::null());
    for k in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "OUTPOST_API_URL",
        "OUTPOST_API_KEY",
        "OUTPOST_ACCOUNT_ID",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run outpost deploy")
}

/// The `<logical id> <ping URL>` lines of a successful deploy.
fn ping_lines(out: &Output) -> Vec<(String, String)> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}, stdout {stdout}, stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| {
            let (id, url) = l.split_once(' ').unwrap();
            (id.to_owned(), url.to_owned())
        })
        .collect()
}

const YAML: &str = "\
project:
  logicalId: ops
  name: Ops jobs
alertChannels:
  - logicalId: ops-mail
    type: EMAIL
    config: {address: ops@example.com}
heartbeatMonitors:
  - logicalId: nightly-backup
    name: Nightly backup
    period: 1
    periodUnit: days
    grace: 30
    graceUnit: minutes
    tags: [backup]
    alertChannels: [ops-mail]
  - logicalId: hourly-sync
    name: Hourly sync
    period: 1
    periodUnit: hours
    grace: 5
    graceUnit: minutes
";

const TOML: &str = r#"
[project]
logicalId = "ops"

[[heartbeatMonitors]]
logicalId = "nightly-backup"
name = "Nightly backup (renamed)"
period = 2
periodUnit = "days"
grace = 1
graceUnit = "hours"
"#;

#[tokio::test]
async fn deploy_prints_ping_urls_that_record_pings() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path());
    let creds_path = dir.path().join("credentials.json");
    let creds: Value =
        serde_json::from_str(&std::fs::read_to_string(&creds_path).unwrap()).unwrap();
    let project = dir.path().join("ops.yaml");
    std::fs::write(&project, YAML).unwrap();
    let creds_arg = creds_path.to_str().unwrap();

    let dry = deploy(
        &[
            project.to_str().unwrap(),
            "--credentials",
            creds_arg,
            "--dry-run",
        ],
        &[],
    );
    assert!(dry.status.success());
    let dry_out = String::from_utf8_lossy(&dry.stdout).to_string();
    assert!(dry_out.contains("CREATE check nightly-backup"), "{dry_out}");

    let out = deploy(
        &[project.to_str().unwrap(), "--credentials", creds_arg],
        &[],
    );
    let lines = ping_lines(&out);
    let ids: Vec<&str> = lines.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, vec!["nightly-backup", "hourly-sync"]);
    let backup_url = lines[0].1.clone();
    assert!(
        backup_url.starts_with(&format!("{}/ping/", serve.base)),
        "{backup_url}"
    );

    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let resp = http.post(&backup_url).send().await.unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);

    // The check has the ping recorded.
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
    let backup = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Nightly backup")
        .unwrap()
        .clone();
    let backup_id = backup["id"].as_str().unwrap().to_owned();
    let events: Value = api(format!("/v1/checks/heartbeats/{backup_id}/events"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let states: Vec<&str> = events[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, vec!["RECEIVED"], "{events}");

    // Re-deploy from TOML through the environment: the same ping URL, the other monitor
    // gone.
    let toml_file = dir.path().join("ops.toml");
    std::fs::write(&toml_file, TOML).unwrap();
    let out = deploy(
        &[toml_file.to_str().unwrap()],
        &[
            ("OUTPOST_API_URL", serve.base.as_str()),
            ("OUTPOST_API_KEY", creds["apiKey"].as_str().unwrap()),
            ("OUTPOST_ACCOUNT_ID", creds["accountId"].as_str().unwrap()),
        ],
    );
    assert_eq!(
        ping_lines(&out),
        vec![("nightly-backup".to_owned(), backup_url.clone())]
    );
    let checks: Value = api("/v1/checks".into())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = checks
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["Nightly backup (renamed)"]);
    drop(serve);
}

#[test]
fn bad_input_exits_2_and_unreachable_service_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "heartbeatMonitors:\n  - {logicalId: x, name: X, period: one}\n",
    )
    .unwrap();
    let env = [
        ("OUTPOST_API_URL", "http://127.0.0.1:9"),
        ("OUTPOST_API_KEY", "k"),
        ("OUTPOST_ACCOUNT_ID", "00000000-0000-0000-0000-000000000000"),
    ];
    let out = deploy(&[bad.to_str().unwrap()], &env);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("bad.yaml"),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");

    let dangling = dir.path().join("p.json");
    std::fs::write(
        &dangling,
        r#"{"heartbeatMonitors": [{"logicalId": "x", "name": "X", "period": 1, "periodUnit": "hours",
            "grace": 0, "graceUnit": "minutes", "alertChannels": ["nope"]}]}"#,
    )
    .unwrap();
    let out = deploy(&[dangling.to_str().unwrap()], &env);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"nope\""));

    let other = dir.path().join("p.txt");
    std::fs::write(&other, "x").unwrap();
    assert_eq!(
        deploy(&[other.to_str().unwrap()], &env).status.code(),
        Some(2)
    );
    let missing = dir.path().join("missing.yaml");
    assert_eq!(
        deploy(&[missing.to_str().unwrap()], &env).status.code(),
        Some(2)
    );

    // A closed port: the service cannot be reached.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let good = dir.path().join("good.json");
    std::fs::write(&good, r#"{"heartbeatMonitors": []}"#).unwrap();
    let out = deploy(
        &[good.to_str().unwrap()],
        &[("OUTPOST_API_URL", url.as_str()), env[1], env[2]],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No credentials at all: bad input.
    assert_eq!(
        deploy(&[good.to_str().unwrap()], &[]).status.code(),
        Some(2)
    );
}
