//! schemathesis (PyPI, `schemathesis>=4,<5`) and openapi-spec-validator in a virtualenv
//! under `<target>/tmp/schemathesis-venv`, installed with pip on first use (the only
//! step that needs the network; later runs reuse it), and a reader of schemathesis'
//! NDJSON report that turns its failures into a short readable summary.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use base64::Engine;
use serde_json::Value;

const PACKAGES: &[&str] = &["schemathesis>=4,<5", "openapi-spec-validator>=0.7,<0.8"];

static INSTALL: Mutex<()> = Mutex::new(());

fn has_packages(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import schemathesis, openapi_spec_validator"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn run_step(cmd: &mut Command, what: &str) {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e} (python3 and python3-venv are needed; scripts/test installs them)"));
    assert!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The virtualenv's python with schemathesis and openapi-spec-validator, installing
/// them if needed. Panics with the reason when that is not possible: conformance is
/// not proven by a skipped test.
pub fn python() -> PathBuf {
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("schemathesis-venv");
    let python = venv.join("bin").join("python");
    if has_packages(&python) {
        return python;
    }
    let _ = std::fs::remove_dir_all(&venv);
    run_step(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    );
    run_step(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(PACKAGES),
        "pip install schemathesis",
    );
    assert!(has_packages(&python), "schemathesis is not importable");
    python
}

/// One failed check of one request, as the summary shows it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Failure {
    pub operation: String,
    pub check: String,
    pub title: String,
    pub message: String,
    pub request: String,
    pub response: String,
}

fn body_text(v: &Value, limit: usize) -> String {
    let Some(b64) = v["$base64"].as_str() else {
        return String::new();
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    text.chars().take(limit).collect()
}

/// The failures and engine errors recorded in a schemathesis NDJSON report, one entry
/// per (operation, check, first line of the message).
pub fn failures(report: &Path) -> (Vec<Failure>, Vec<String>) {
    let text = std::fs::read_to_string(report)
        .unwrap_or_else(|e| panic!("read the schemathesis report {}: {e}", report.display()));
    let mut seen = BTreeSet::new();
    let mut failures = Vec::new();
    let mut errors = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(e) = event.get("NonFatalError") {
            let label = e["label"].as_str().unwrap_or("?");
            let info = e["value"].to_string();
            errors.push(format!(
                "{label}: {}",
                info.chars().take(600).collect::<String>()
            ));
        }
        let Some(recorder) = event.get("ScenarioFinished").map(|s| &s["recorder"]) else {
            continue;
        };
        let Some(checks) = recorder["checks"].as_object() else {
            continue;
        };
        for (case_id, results) in checks {
            for result in results.as_array().into_iter().flatten() {
                if result["status"] != "failure" {
                    continue;
                }
                let failure = &result["failure_info"]["failure"];
                let message = failure["message"].as_str().unwrap_or("").to_owned();
                let first_line = message.lines().next().unwrap_or("").to_owned();
                let operation = recorder["label"].as_str().unwrap_or("?").to_owned();
                let check = result["name"].as_str().unwrap_or("?").to_owned();
                if !seen.insert((operation.clone(), check.clone(), first_line)) {
                    continue;
                }
                let interaction = &recorder["interactions"][case_id];
                let request = format!(
                    "{} {} {}",
                    interaction["request"]["method"].as_str().unwrap_or(""),
                    interaction["request"]["uri"].as_str().unwrap_or(""),
                    body_text(&interaction["request"]["body"], 300)
                );
                let response = match interaction["response"]["status_code"].as_u64() {
                    Some(code) => format!(
                        "{code} {}",
                        body_text(&interaction["response"]["content"], 300)
                    ),
                    None => "no response".to_owned(),
                };
                failures.push(Failure {
                    operation,
                    check,
                    title: failure["title"].as_str().unwrap_or("").to_owned(),
                    message: message
                        .lines()
                        .take(12)
                        .collect::<Vec<_>>()
                        .join("\n      "),
                    request,
                    response,
                });
            }
        }
    }
    failures.sort();
    (failures, errors)
}

/// The failures as the assertion message shows them.
pub fn summary(failures: &[Failure], errors: &[String]) -> String {
    let mut out = format!(
        "schemathesis found {} distinct failure(s) and {} error(s):\n",
        failures.len(),
        errors.len()
    );
    for f in failures {
        out.push_str(&format!(
            "\n- {} [{}] {}\n      {}\n    request:  {}\n    response: {}\n",
            f.operation, f.check, f.title, f.message, f.request, f.response
        ));
    }
    for e in errors {
        out.push_str(&format!("\n- error: {e}\n"));
    }
    out
}

/// Runs `schemathesis run` with `document` against `base` (examples and fuzzing, both
/// positive and negative data, one worker, no example database) with the checks every
/// conformance test holds the service to: no 5xx, answers on their schema and status
/// codes, schema-violating data refused. `args` adds headers, filters and limits; the
/// NDJSON report goes to `report`.
pub fn run(
    python: &Path,
    document: &Path,
    base: &str,
    args: &[String],
    report: &Path,
) -> std::process::Output {
    let cwd = report.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(cwd).expect("create the report's directory");
    Command::new(python)
        .args(["-m", "schemathesis.cli", "run"])
        .arg(document)
        .args(["--url", base])
        .args([
            "--checks",
            "not_a_server_error,response_schema_conformance,status_code_conformance,negative_data_rejection",
            "--phases",
            "examples,fuzzing",
            "--mode",
            "all",
            // One worker: with two, one operation's cases delete what the other's
            // cases name (an alert channel a heartbeat subscribes to, say), and
            // Hypothesis reports the replay that then answers differently as a flaky
            // error although the service answered both correctly.
            "--workers",
            "1",
            "--request-timeout",
            "30",
            "--generation-database",
            "none",
            "--no-color",
            "--report",
            "ndjson",
        ])
        .args(args)
        .arg("--report-ndjson-path")
        .arg(report)
        .env("NO_PROXY", "127.0.0.1")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("run schemathesis")
}

/// Asserts that the run of [`run`] found nothing (no failure, no error) and ended
/// well. A report with findings is kept as `<target tmp>/<keep_as>` for a closer look
/// (the test's temporary directory goes with it).
pub fn assert_clean(report: &Path, out: &std::process::Output, keep_as: &str) {
    let (failures, errors) = failures(report);
    if !(failures.is_empty() && errors.is_empty()) {
        let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join(keep_as);
        let _ = std::fs::copy(report, &kept);
        eprintln!("schemathesis report kept at {}", kept.display());
    }
    assert!(
        failures.is_empty() && errors.is_empty(),
        "{}",
        summary(&failures, &errors)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        out.status.success(),
        "schemathesis failed without a recorded failure ({}):\n{}\n{}",
        out.status,
        lines[lines.len().saturating_sub(60)..].join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The operations (`METHOD /path`) a schemathesis NDJSON report has scenarios of.
pub fn tested_operations(report: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(report)
        .unwrap_or_else(|e| panic!("read the schemathesis report {}: {e}", report.display()));
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|event| {
            event.get("ScenarioFinished")?["recorder"]["label"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// The status codes of every answer the operation `label` (`METHOD /path`) got in a
/// schemathesis NDJSON report.
pub fn status_codes(report: &Path, label: &str) -> Vec<u16> {
    let text = std::fs::read_to_string(report)
        .unwrap_or_else(|e| panic!("read the schemathesis report {}: {e}", report.display()));
    let mut codes = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(recorder) = event.get("ScenarioFinished").map(|s| &s["recorder"]) else {
            continue;
        };
        if recorder["label"].as_str() != Some(label) {
            continue;
        }
        let Some(interactions) = recorder["interactions"].as_object() else {
            continue;
        };
        codes.extend(interactions.values().filter_map(|i| {
            i["response"]["status_code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
        }));
    }
    codes
}
