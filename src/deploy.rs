//! `outpost deploy FILE`: monitoring as code from the command line. Reads a project
//! file (YAML, TOML or JSON, by extension) declaring heartbeat monitors and alert
//! channels, sends it to the service's deploy endpoint as the vendor CLI does (a gzip
//! JSON body), follows the deployment's event stream, and returns one
//! `<logical id> <ping URL>` line per heartbeat monitor.
//!
//! The file:
//! ```yaml
//! project: {logicalId: ops, name: Ops}      # optional; default logical id: file stem
//! alertChannels:
//!   - {logicalId: ops-mail, type: EMAIL, config: {address: ops@example.com}}
//! heartbeatMonitors:
//!   - {logicalId: backup, name: Nightly backup, period: 1, periodUnit: hours,
//!      grace: 30, graceUnit: minutes, alertChannels: [ops-mail]}
//! ```
//! The service is named by `--credentials PATH` (the `credentials.json` that `outpost
//! up`/`serve` writes) or by OUTPOST_API_URL, OUTPOST_API_KEY and OUTPOST_ACCOUNT_ID.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

/// Largest project file.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Largest answer read from the service.
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// Time limit of each request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a deploy failed.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The file, the credentials or the project is wrong (exit 2).
    #[error("{0}")]
    Input(String),
    /// The service could not be reached or failed (exit 1).
    #[error("{0}")]
    Service(String),
}

impl DeployError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            DeployError::Input(_) => 2,
            DeployError::Service(_) => 1,
        }
    }
}

/// Where to deploy.
#[derive(Debug, Clone)]
pub struct Target {
    pub api_url: String,
    pub api_key: String,
    pub account_id: String,
}

/// A project file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectFile {
    #[serde(default)]
    pub project: Option<ProjectMeta>,
    #[serde(default)]
    pub heartbeat_monitors: Vec<MonitorDecl>,
    #[serde(default)]
    pub alert_channels: Vec<ChannelDecl>,
}

/// The project's identity.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectMeta {
    pub logical_id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub repo_url: Option<String>,
}

/// A heartbeat monitor.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MonitorDecl {
    pub logical_id: String,
    pub name: String,
    /// A number, as the API takes it (`1`, `1.5`), kept as written.
    pub period: serde_json::Number,
    pub period_unit: String,
    pub grace: serde_json::Number,
    pub grace_unit: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub activated: Option<bool>,
    #[serde(default)]
    pub muted: Option<bool>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Logical ids of the alert channels of this file.
    #[serde(default)]
    pub alert_channels: Option<Vec<String>>,
}

/// An alert channel.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChannelDecl {
    pub logical_id: String,
    #[serde(rename = "type")]
    pub channel_type: String,
    pub config: Value,
}

/// Reads the target from a credentials file, else from the environment.
pub fn target(credentials: Option<&Path>) -> Result<Target, DeployError> {
    if let Some(path) = credentials {
        let text = read_capped(path)?;
        let creds: crate::service::Credentials = serde_json::from_str(&text)
            .map_err(|e| DeployError::Input(format!("credentials file {}: {e}", path.display())))?;
        return Ok(Target {
            api_url: creds.api_url,
            api_key: creds.api_key,
            account_id: creds.account_id,
        });
    }
    let var = |name: &str| match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(v.trim().to_owned()),
        _ => Err(DeployError::Input(format!(
            "{name} is not set (give --credentials PATH or set OUTPOST_API_URL, OUTPOST_API_KEY and OUTPOST_ACCOUNT_ID)"
        ))),
    };
    Ok(Target {
        api_url: var("OUTPOST_API_URL")?,
        api_key: var("OUTPOST_API_KEY")?,
        account_id: var("OUTPOST_ACCOUNT_ID")?,
    })
}

fn read_capped(path: &Path) -> Result<String, DeployError> {
    let file = std::fs::File::open(path)
        .map_err(|e| DeployError::Input(format!("{}: {e}", path.display())))?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| DeployError::Input(format!("{}: {e}", path.display())))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(DeployError::Input(format!(
            "{}: larger than {MAX_FILE_BYTES} bytes",
            path.display()
        )));
    }
    Ok(text)
}

/// Reads and parses a project file (`.yaml`/`.yml`, `.toml` or `.json`).
pub fn load(path: &Path) -> Result<ProjectFile, DeployError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let bad = |e: &dyn std::fmt::Display| {
        DeployError::Input(format!("{}: {}", path.display(), one_line(&e.to_string())))
    };
    let parsed: ProjectFile = match ext.as_str() {
        "yaml" | "yml" => serde_norway::from_str(&read_capped(path)?).map_err(|e| bad(&e))?,
        "toml" => toml::from_str(&read_capped(path)?).map_err(|e| bad(&e))?,
        "json" => serde_json::from_str(&read_capped(path)?).map_err(|e| bad(&e))?,
        _ => {
            return Err(DeployError::Input(format!(
                "{}: unknown file type (use .yaml, .yml, .toml or .json)",
                path.display()
            )));
        }
    };
    let channels: HashSet<&str> = parsed
        .alert_channels
        .iter()
        .map(|c| c.logical_id.as_str())
        .collect();
    for m in &parsed.heartbeat_monitors {
        for c in m.alert_channels.iter().flatten() {
            if !channels.contains(c.as_str()) {
                return Err(DeployError::Input(format!(
                    "{}: heartbeat monitor {:?} names alert channel {c:?}, which the file does not declare",
                    path.display(),
                    m.logical_id
                )));
            }
        }
    }
    Ok(parsed)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The deploy body of a project file (`project_id`: the project's logical id when the
/// file does not name one).
pub fn payload(file: &ProjectFile, project_id: &str) -> Value {
    let (logical_id, name, repo_url) = match &file.project {
        Some(p) => (
            p.logical_id.clone(),
            p.name.clone().unwrap_or_else(|| p.logical_id.clone()),
            p.repo_url.clone(),
        ),
        None => (project_id.to_owned(), project_id.to_owned(), None),
    };
    let mut resources = Vec::new();
    for c in &file.alert_channels {
        resources.push(json!({
            "logicalId": c.logical_id,
            "type": "alert-channel",
            "member": true,
            "payload": {"type": c.channel_type, "config": c.config},
        }));
    }
    for m in &file.heartbeat_monitors {
        resources.push(json!({
            "logicalId": m.logical_id,
            "type": "check",
            "member": true,
            "payload": {
                "name": m.name,
                "description": m.description,
                "activated": m.activated.unwrap_or(true),
                "muted": m.muted.unwrap_or(false),
                "tags": m.tags.clone().unwrap_or_default(),
                "checkType": "HEARTBEAT",
                "heartbeat": {
                    "period": m.period, "periodUnit": m.period_unit,
                    "grace": m.grace, "graceUnit": m.grace_unit,
                },
            },
        }));
        for c in m.alert_channels.iter().flatten() {
            resources.push(json!({
                "logicalId": format!("{}:{c}", m.logical_id),
                "type": "alert-channel-subscription",
                "member": true,
                "payload": {
                    "alertChannelId": {"ref": c},
                    "checkId": {"ref": m.logical_id},
                    "activated": true,
                },
            }));
        }
    }
    json!({
        "project": {"logicalId": logical_id, "name": name, "repoUrl": repo_url},
        "sharedFiles": [],
        "resources": resources,
        "repoInfo": Value::Null,
    })
}

/// The client side of one deploy.
struct Client {
    http: reqwest::Client,
    target: Target,
}

impl Client {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.target.api_url.trim_end_matches('/'))
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .bearer_auth(&self.target.api_key)
            .header("x-service-account", &self.target.account_id)
    }

    /// Sends a request; returns the answer's text (bounded) when it is a success.
    async fn send(&self, what: &str, req: reqwest::RequestBuilder) -> Result<String, DeployError> {
        let mut resp = req
            .send()
            .await
            .map_err(|e| DeployError::Service(format!("{what}: cannot reach the service: {e}")))?;
        let status = resp.status();
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| DeployError::Service(format!("{what}: reading the answer: {e}")))?
        {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(DeployError::Service(format!(
                    "{what}: answer larger than {MAX_ANSWER_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        if status.is_success() {
            return Ok(text);
        }
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| one_line(&text));
        let line = format!("{what}: {status}: {message}");
        if status == reqwest::StatusCode::BAD_REQUEST {
            Err(DeployError::Input(line))
        } else {
            Err(DeployError::Service(line))
        }
    }

    async fn json(&self, what: &str, req: reqwest::RequestBuilder) -> Result<Value, DeployError> {
        let text = self.send(what, req).await?;
        serde_json::from_str(&text)
            .map_err(|e| DeployError::Service(format!("{what}: the answer is not JSON: {e}")))
    }
}

/// Parses a server-sent event stream into (event, data) pairs.
pub fn parse_events(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let (mut event, mut data) = (String::from("message"), Vec::<&str>::new());
    for line in text.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if !data.is_empty() {
                out.push((
                    std::mem::replace(&mut event, "message".into()),
                    data.join("\n"),
                ));
                data.clear();
            }
        } else if let Some(v) = line.strip_prefix("event:") {
            event = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    out
}

fn gzip(bytes: &[u8]) -> Result<Vec<u8>, DeployError> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes)
        .and_then(|()| enc.finish())
        .map_err(|e| DeployError::Service(format!("compressing the project: {e}")))
}

/// Deploys `file` (or, with `dry_run`, only asks for the diff). Returns the lines to
/// print: `<logical id> <ping URL>` per heartbeat monitor, or the diff of a dry run
/// (`<action> <type> <logical id>`).
pub async fn run(
    file: &Path,
    credentials: Option<&Path>,
    dry_run: bool,
) -> Result<Vec<String>, DeployError> {
    let project = load(file)?;
    let target = target(credentials)?;
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("project")
        .to_owned();
    let body = payload(&project, &stem);
    let project_id = body["project"]["logicalId"]
        .as_str()
        .unwrap_or(&stem)
        .to_owned();
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| DeployError::Service(format!("HTTP client: {e}")))?;
    let client = Client { http, target };
    let account = client.target.account_id.clone();
    client
        .json(
            "checking the account",
            client.request(reqwest::Method::GET, &format!("/next/accounts/{account}")),
        )
        .await?;
    let bytes = serde_json::to_vec(&body)
        .map_err(|e| DeployError::Service(format!("encoding the project: {e}")))?;
    let answer = client
        .json(
            "deploying",
            client
                .request(
                    reqwest::Method::POST,
                    &format!("/v1/projects/deploy?dryRun={dry_run}&scheduleOnDeploy=true"),
                )
                .header("content-type", "application/json")
                .header("content-encoding", "gzip")
                .body(gzip(&bytes)?),
        )
        .await?;
    if dry_run {
        return Ok(diff_lines(answer.get("diff")));
    }
    let Some(id) = answer.get("id").and_then(Value::as_str) else {
        return Err(DeployError::Service(
            "deploying: the answer has no deployment id".into(),
        ));
    };
    let stream = client
        .send(
            "following the deployment",
            client
                .request(
                    reqwest::Method::GET,
                    &format!("/v1/projects/{project_id}/deployments/{id}/events"),
                )
                .header("accept", "text/event-stream"),
        )
        .await?;
    let mut diff = None;
    for (event, data) in parse_events(&stream) {
        let data: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
        match event.as_str() {
            "complete" => {
                diff = Some(data["result"]["diff"].clone());
                break;
            }
            "error" => {
                let message = data["message"].as_str().unwrap_or("deployment failed");
                return Err(DeployError::Input(format!("deployment failed: {message}")));
            }
            _ => {}
        }
    }
    let Some(diff) = diff else {
        return Err(DeployError::Service(
            "the deployment's event stream ended without a result".into(),
        ));
    };
    let mut lines = Vec::new();
    for m in &project.heartbeat_monitors {
        let physical = diff.as_array().and_then(|d| {
            d.iter()
                .find(|e| e["type"] == "check" && e["logicalId"] == m.logical_id.as_str())
        });
        let Some(check_id) = physical.and_then(|e| e["physicalId"].as_str()) else {
            return Err(DeployError::Service(format!(
                "the deployment does not name the check of {}",
                m.logical_id
            )));
        };
        let check = client
            .json(
                "reading a deployed check",
                client.request(reqwest::Method::GET, &format!("/v1/checks/{check_id}")),
            )
            .await?;
        let Some(url) = check["heartbeat"]["pingUrl"].as_str() else {
            return Err(DeployError::Service(format!(
                "check {check_id} has no heartbeat.pingUrl"
            )));
        };
        lines.push(format!("{} {url}", m.logical_id));
    }
    Ok(lines)
}

fn diff_lines(diff: Option<&Value>) -> Vec<String> {
    diff.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|d| {
            format!(
                "{} {} {}",
                d["action"].as_str().unwrap_or("?"),
                d["type"].as_str().unwrap_or("?"),
                d["logicalId"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_parse() {
        let evs = parse_events(
            "event: progress\ndata: {\"progress\":50}\n\nevent: complete\ndata: {}\n\n",
        );
        assert_eq!(
            evs,
            vec![
                ("progress".to_owned(), "{\"progress\":50}".to_owned()),
                ("complete".to_owned(), "{}".to_owned())
            ]
        );
    }

    #[test]
    fn payload_has_subscriptions_of_named_channels() {
        let file: ProjectFile = serde_norway::from_str(
            "alertChannels:\n  - {logicalId: m, type: EMAIL, config: {address: a@b.c}}\nheartbeatMonitors:\n  - {logicalId: b, name: B, period: 1, periodUnit: hours, grace: 0, graceUnit: minutes, alertChannels: [m]}\n",
        )
        .unwrap();
        let p = payload(&file, "stem");
        assert_eq!(p["project"]["logicalId"], "stem");
        let types: Vec<&str> = p["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            vec!["alert-channel", "check", "alert-channel-subscription"]
        );
        assert_eq!(p["resources"][2]["payload"]["checkId"]["ref"], "b");
        let heartbeat = &p["resources"][1]["payload"]["heartbeat"];
        assert_eq!(heartbeat["period"].to_string(), "1");
        assert_eq!(heartbeat["grace"].to_string(), "0");
    }

    /// Periods and graces are numbers as the API takes them: fractions too, in YAML and
    /// TOML, and a text is refused while the file is read.
    #[test]
    fn fractional_periods_and_graces_are_kept() {
        let yaml: ProjectFile = serde_norway::from_str(
            "heartbeatMonitors:\n  - {logicalId: b, name: B, period: 1.5, periodUnit: hours, grace: 0.25, graceUnit: hours}\n",
        )
        .unwrap();
        let p = payload(&yaml, "stem");
        let heartbeat = &p["resources"][0]["payload"]["heartbeat"];
        assert_eq!(heartbeat["period"], 1.5);
        assert_eq!(heartbeat["grace"], 0.25);
        let toml: ProjectFile = toml::from_str(
            "[[heartbeatMonitors]]\nlogicalId = \"b\"\nname = \"B\"\nperiod = 2.5\nperiodUnit = \"days\"\ngrace = 1\ngraceUnit = \"hours\"\n",
        )
        .unwrap();
        let p = payload(&toml, "stem");
        assert_eq!(p["resources"][0]["payload"]["heartbeat"]["period"], 2.5);
        assert_eq!(
            p["resources"][0]["payload"]["heartbeat"]["grace"].to_string(),
            "1"
        );
        let text = serde_norway::from_str::<ProjectFile>(
            "heartbeatMonitors:\n  - {logicalId: b, name: B, period: soon, periodUnit: hours, grace: 0, graceUnit: hours}\n",
        );
        assert!(text.is_err());
    }
}
