//! Error reports (EXTERNAL_OBSERVABILITY) through real processes: an agent meets a real
//! internal error (corrupt files in its spool, whose parse errors quote the agent key and
//! a SERVICE_SECRET_* value), the control plane stores the reports, and
//! `outpost admin error-reports` shows them scrubbed. With EXTERNAL_OBSERVABILITY=off
//! the same error reaches the agent's log and nothing reaches the store.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::harness::{Agent, ControlPlane, bin, eventually, free_port};

const SECRET_NAME: &str = "SERVICE_SECRET_DB_PASSWORD";
const SECRET_VALUE: &str = "hunter2-db-passw0rd";

/// Writes a spool file for a made-up lease whose result names `check_type`: the agent
/// cannot read it back, and the parse error quotes that value.
fn corrupt_spool_file(spool: &Path, check_type: &str) -> Uuid {
    let (job, lease) = (Uuid::new_v4(), Uuid::new_v4());
    std::fs::create_dir_all(spool).unwrap();
    let body = json!({"jobId": job, "leaseId": lease, "result": {"checkType": check_type}});
    std::fs::write(
        spool.join(format!("{job}_{lease}.json")),
        serde_json::to_vec(&body).unwrap(),
    )
    .unwrap();
    job
}

/// `outpost admin error-reports` on the control plane's data directory.
fn admin_error_reports(data: &Path, cp: &ControlPlane) -> (Value, String) {
    let out = Command::new(bin())
        .args(["admin", "error-reports", "--data-dir"])
        .arg(data)
        .args(["--account", &cp.creds.account_id])
        .args(["--location", &cp.creds.private_location])
        .env_remove("OUTPOST_DATA_DIR")
        .output()
        .expect("run outpost admin");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "admin error-reports: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        serde_json::from_str(&stdout).expect("admin prints JSON"),
        stdout,
    )
}

/// Both spool files moved to the quarantine (the agent met the error).
async fn quarantined(spool: &Path, n: usize) {
    eventually("the corrupt files in quarantine", || async {
        let count = std::fs::read_dir(spool.join("quarantine"))
            .ok()?
            .filter_map(Result::ok)
            .count();
        (count == n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_errors_of_an_agent_reach_the_store_scrubbed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let spool = dir.path().join("spool");
    let cp = ControlPlane::start(&data, free_port(), 15).await;
    let agent_key = cp.creds.agent_key.clone();
    let with_key = corrupt_spool_file(&spool, &agent_key);
    let with_secret = corrupt_spool_file(&spool, SECRET_VALUE);

    let mut agent = Agent::start(&cp, &spool, &[(SECRET_NAME, SECRET_VALUE)]);
    agent.await_ready().await;
    let (reports, printed) = eventually("two error reports in the store", || async {
        let (reports, printed) = admin_error_reports(&data, &cp);
        (reports.as_array().map(Vec::len) == Some(2)).then_some((reports, printed))
    })
    .await;

    assert!(
        !printed.contains(&agent_key),
        "the agent key leaked: {printed}"
    );
    assert!(
        !printed.contains(SECRET_VALUE),
        "the secret leaked: {printed}"
    );
    for job in [with_key, with_secret] {
        let report = reports
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| {
                r["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&job.to_string()))
            })
            .unwrap_or_else(|| panic!("no report names job {job}: {printed}"));
        assert_eq!(report["event"], "agent.spool.corrupt_file", "{report}");
        let message = report["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("moved to quarantine") && message.contains("unknown variant `*****`"),
            "the parse error, its quoted value masked: {message}"
        );
        assert_eq!(report["count"], 1, "{report}");
        assert_eq!(report["location"], cp.creds.private_location.as_str());
        assert_eq!(report["accountId"], cp.creds.account_id.as_str());
        assert_eq!(report["agentVersion"], outpost::VERSION);
        assert_eq!(
            report["platform"],
            format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
        );
        assert!(
            report["runtime"]
                .as_str()
                .is_some_and(|r| r.starts_with("rustc ") && r.contains("tokio ")),
            "{report}"
        );
        assert!(
            report["backtrace"].is_null(),
            "no backtrace for a non-panic: {report}"
        );
    }
    let log = agent.proc.output();
    assert!(log.contains("agent.spool.corrupt_file"), "{log}");
    assert!(
        !log.contains(&agent_key) && !log.contains(SECRET_VALUE),
        "{log}"
    );

    agent.proc.signal("TERM");
    assert_eq!(
        agent.proc.wait_exit().await,
        Some(0),
        "{}",
        agent.proc.output()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_external_observability_off_nothing_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let spool = dir.path().join("spool");
    let cp = ControlPlane::start(&data, free_port(), 15).await;
    corrupt_spool_file(&spool, &cp.creds.agent_key);
    corrupt_spool_file(&spool, SECRET_VALUE);

    let mut agent = Agent::start(
        &cp,
        &spool,
        &[
            (SECRET_NAME, SECRET_VALUE),
            ("EXTERNAL_OBSERVABILITY", "off"),
        ],
    );
    agent.await_ready().await;
    // The agent met the error: both files were quarantined and the events logged.
    quarantined(&spool, 2).await;
    eventually("the internal errors in the agent's log", || async {
        let log = agent.proc.output();
        (log.matches("agent.spool.corrupt_file").count() == 2).then_some(())
    })
    .await;
    // A reporting agent sends what is waiting when it stops (at the latest): once this
    // one has stopped, anything it reported would be in the store.
    agent.proc.signal("TERM");
    assert_eq!(
        agent.proc.wait_exit().await,
        Some(0),
        "{}",
        agent.proc.output()
    );
    let (reports, printed) = admin_error_reports(&data, &cp);
    assert_eq!(reports, json!([]), "{printed}");
    let log = agent.proc.output();
    assert!(
        log.contains("error reports to the service are off"),
        "{log}"
    );
}
