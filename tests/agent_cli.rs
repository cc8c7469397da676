//! `outpost agent` configuration errors, through the real binary: exit code 2 and one
//! stderr line naming the variable, never showing the API key.

use std::process::{Command, Output};

const KEY: &str = "agent-key-never-printed-0123";

fn run_agent(env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_outpost"))
        .arg("agent")
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("run outpost agent")
}

/// Exit code 2 and exactly one stderr line, which is returned.
fn one_line_error(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr:?}");
    assert!(!stderr.contains(KEY), "the key leaked: {stderr}");
    lines[0].to_owned()
}

#[test]
fn missing_api_key_exits_2_naming_it() {
    let out = run_agent(&[("API_URL", "http://127.0.0.1:9")]);
    let line = one_line_error(&out);
    assert!(line.starts_with("error: API_KEY "), "{line}");
}

#[test]
fn missing_api_url_exits_2_naming_it() {
    let out = run_agent(&[("API_KEY", KEY)]);
    let line = one_line_error(&out);
    assert!(line.starts_with("error: API_URL "), "{line}");
}

#[test]
fn invalid_job_concurrency_names_it() {
    let out = run_agent(&[
        ("API_KEY", KEY),
        ("API_URL", "http://127.0.0.1:9"),
        ("JOB_CONCURRENCY", "abc"),
    ]);
    let line = one_line_error(&out);
    assert_eq!(
        line,
        r#"error: JOB_CONCURRENCY must be an integer from 1 to 10 (got "abc")"#
    );
}

#[test]
fn other_invalid_values_name_their_variable() {
    for (variable, value) in [
        ("UPTIME_CONCURRENCY", "0"),
        ("AGENT_HEALTH_PORT", "70000"),
        ("SHUTDOWN_GRACE_SECONDS", "soon"),
        ("EXTERNAL_OBSERVABILITY", "maybe"),
        ("API_URL", "ftp://127.0.0.1/"),
    ] {
        let mut env = vec![("API_KEY", KEY), ("API_URL", "http://127.0.0.1:9")];
        env.retain(|(k, _)| *k != variable);
        env.push((variable, value));
        let line = one_line_error(&run_agent(&env));
        assert!(
            line.starts_with(&format!("error: {variable} ")),
            "{variable}: {line}"
        );
    }
}
