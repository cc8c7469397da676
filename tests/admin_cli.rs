//! `outpost admin` as a real binary on the data directory of a real `outpost serve`:
//! the accounts, API keys, locations and agent keys it creates authenticate against the
//! running service, revoked ones stop working, bad input exits 2.

mod serve_support;

use serve_support::Serve;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use reqwest::StatusCode;
use serde_json::Value;
use uuid::Uuid;

use outpost::protocol::{HelloRequest, PROTOCOL_VERSION, paths};

fn admin(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_outpost"))
        .arg("admin")
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env_remove("OUTPOST_DATA_DIR")
        .stdin(Stdio::null())
        .output()
        .expect("run outpost admin")
}

/// Runs an admin command that must succeed; returns its JSON answer.
fn admin_ok(dir: &Path, args: &[&str]) -> Value {
    let out = admin(dir, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn str_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

async fn list_locations(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    account: &str,
) -> StatusCode {
    http.get(format!("{base}/v1/private-locations"))
        .bearer_auth(key)
        .header("x-service-account", account)
        .send()
        .await
        .unwrap()
        .status()
}

async fn hello(http: &reqwest::Client, base: &str, key: &str) -> StatusCode {
    http.post(format!("{base}{}", paths::HELLO))
        .bearer_auth(key)
        .json(&HelloRequest {
            agent_id: Uuid::new_v4(),
            agent_version: "test".into(),
            protocol_version: PROTOCOL_VERSION,
        })
        .send()
        .await
        .unwrap()
        .status()
}

/// Polls `status` until it answers `want`; fails after a minute (far beyond the
/// documented bound of one second: a hang, not a slow machine).
async fn until_status<F, Fut>(want: StatusCode, what: &str, mut status: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = StatusCode>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let got = status().await;
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: still {got}, want {want}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn admin_credentials_work_against_a_running_service() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    // Before the service runs.
    let account = admin_ok(data, &["create-account", "--name", "Acme"]);
    let account_id = str_of(&account, "accountId").to_owned();
    let api_key = str_of(&account, "apiKey").to_owned();
    assert!(api_key.starts_with("opk_"));

    let serve = Serve::start(data);
    assert_eq!(
        list_locations(&http, &serve.base, &api_key, &account_id).await,
        StatusCode::OK
    );

    // While it runs: a location whose agent key lets an agent say HELLO.
    let location = admin_ok(
        data,
        &[
            "create-location",
            "--account",
            &account_id,
            "--name",
            "Branch Office",
        ],
    );
    assert_eq!(str_of(&location, "slugName"), "branch-office");
    let agent_key = str_of(&location, "agentKey").to_owned();
    assert_eq!(hello(&http, &serve.base, &agent_key).await, StatusCode::OK);

    // A second agent key by slug; revoking the first locks its agent out.
    let second = admin_ok(
        data,
        &[
            "create-location-key",
            "--account",
            &account_id,
            "--location",
            "branch-office",
        ],
    );
    let second_key = str_of(&second, "agentKey").to_owned();
    let first_key_id = str_of(&location, "agentKeyId").to_owned();
    let location_id = str_of(&location, "locationId").to_owned();
    admin_ok(
        data,
        &[
            "revoke-location-key",
            "--account",
            &account_id,
            "--location",
            &location_id,
            "--key-id",
            &first_key_id,
        ],
    );
    // The service keeps key lookups in memory and notices changes made by another
    // process within a second (README, Administration): poll for the refusal.
    until_status(StatusCode::UNAUTHORIZED, "revoked agent key", || {
        hello(&http, &serve.base, &agent_key)
    })
    .await;
    assert_eq!(hello(&http, &serve.base, &second_key).await, StatusCode::OK);

    // A third active key is refused as bad input.
    admin_ok(
        data,
        &[
            "create-location-key",
            "--account",
            &account_id,
            "--location",
            "branch-office",
        ],
    );
    let refused = admin(
        data,
        &[
            "create-location-key",
            "--account",
            &account_id,
            "--location",
            "branch-office",
        ],
    );
    assert_eq!(refused.status.code(), Some(2));

    // Another API key; revoking the first one locks it out.
    let extra = admin_ok(data, &["create-api-key", "--account", &account_id]);
    let extra_key = str_of(&extra, "apiKey").to_owned();
    admin_ok(
        data,
        &[
            "revoke-api-key",
            "--account",
            &account_id,
            "--key-id",
            str_of(&account, "apiKeyId"),
        ],
    );
    until_status(StatusCode::UNAUTHORIZED, "revoked API key", || {
        list_locations(&http, &serve.base, &api_key, &account_id)
    })
    .await;
    assert_eq!(
        list_locations(&http, &serve.base, &extra_key, &account_id).await,
        StatusCode::OK
    );

    // The listing shows the account with masked keys only.
    let listed = admin_ok(data, &["list-accounts"]);
    let text = listed.to_string();
    assert!(text.contains(&account_id));
    assert!(!text.contains(&extra_key[4..]));
    assert!(text.contains("branch-office"));
    drop(serve);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let unknown = Uuid::new_v4().to_string();
    for args in [
        vec!["create-api-key", "--account", unknown.as_str()],
        vec![
            "create-location",
            "--account",
            unknown.as_str(),
            "--name",
            "X",
        ],
        vec!["create-account", "--name", "  "],
        vec![
            "create-location-key",
            "--account",
            "not-a-uuid",
            "--location",
            "x",
        ],
        vec!["error-reports", "--account", unknown.as_str()],
        vec!["error-reports", "--location", "nowhere"],
        vec!["error-reports", "--limit", "0"],
    ] {
        let out = admin(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("error:"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // A slug that no name can make valid is refused too.
    let account = admin_ok(dir.path(), &["create-account", "--name", "A"]);
    let out = admin(
        dir.path(),
        &[
            "create-location",
            "--account",
            str_of(&account, "accountId"),
            "--name",
            "!!!",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--slug"), "{stderr}");
}

#[test]
fn error_reports_are_listed_by_account_and_location() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        admin_ok(dir.path(), &["error-reports"]),
        serde_json::json!([])
    );
    // The same slug in two accounts: naming it alone is ambiguous.
    let mut accounts = Vec::new();
    for name in ["A", "B"] {
        let account = admin_ok(dir.path(), &["create-account", "--name", name]);
        let id = str_of(&account, "accountId").to_owned();
        admin_ok(
            dir.path(),
            &[
                "create-location",
                "--account",
                &id,
                "--name",
                "Edge",
                "--slug",
                "edge",
            ],
        );
        accounts.push(id);
    }
    let out = admin(dir.path(), &["error-reports", "--location", "edge"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--account"), "{stderr}");
    let listed = admin_ok(
        dir.path(),
        &[
            "error-reports",
            "--account",
            &accounts[0],
            "--location",
            "edge",
        ],
    );
    assert_eq!(listed, serde_json::json!([]));
}
