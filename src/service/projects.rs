//! Monitoring as code: the deploy of a project (`POST /v1/projects/deploy`), its dry
//! run, and the removal of a project.
//!
//! A project (its logical id, per account) declares resources keyed by (type, logical
//! id): `check` (HEARTBEAT checks only in this version), `alert-channel` and
//! `alert-channel-subscription` (a channel and a check of the same deploy, named by
//! `{ref: logicalId}`). A deploy validates everything first, then creates what is new,
//! updates in place what exists (same check id, same ping token), sets each check's
//! subscriptions to those declared, and deletes what the project no longer declares.
//! Deploys are serialised within the process.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::model::CheckType;
use crate::service::alerts::channels::normalize_channel;
use crate::service::api::heartbeats::{create_heartbeat_check, update_heartbeat_check};
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::heartbeats::doc::normalize_heartbeat;
use crate::service::store::{ResourceRecord, now_ms};

/// Resource types.
pub const CHECK: &str = "check";
pub const ALERT_CHANNEL: &str = "alert-channel";
pub const SUBSCRIPTION: &str = "alert-channel-subscription";
/// Most resources of one deploy.
pub const MAX_RESOURCES: usize = 1000;
/// Longest logical id.
pub const MAX_LOGICAL_ID_LEN: usize = 255;

static DEPLOYS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One declared resource.
#[derive(Debug, Clone)]
pub struct Resource {
    pub resource_type: &'static str,
    pub logical_id: String,
    pub payload: Map<String, Value>,
}

/// A validated deploy body.
#[derive(Debug, Clone)]
pub struct DeployRequest {
    pub project: String,
    pub resources: Vec<Resource>,
}

/// One line of a diff.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffEntry {
    pub resource_type: String,
    pub logical_id: String,
    pub physical_id: Value,
    /// CREATE, UPDATE or DELETE.
    pub action: &'static str,
}

impl DiffEntry {
    pub fn json(&self) -> Value {
        json!({
            "type": self.resource_type,
            "logicalId": self.logical_id,
            "physicalId": self.physical_id,
            "action": self.action,
        })
    }
}

/// The diff as the API shows it.
pub fn diff_json(diff: &[DiffEntry]) -> Value {
    Value::Array(diff.iter().map(DiffEntry::json).collect())
}

/// Checks a logical id (of a project or a resource).
pub fn logical_id(v: Option<&Value>, field: &str) -> Result<String, ApiError> {
    match v {
        Some(Value::String(s))
            if !s.trim().is_empty() && s.chars().count() <= MAX_LOGICAL_ID_LEN =>
        {
            Ok(s.clone())
        }
        None | Some(Value::Null) => Err(ApiError::invalid(field, "is required")),
        _ => Err(ApiError::invalid(
            field,
            format!("must be a non-empty string of at most {MAX_LOGICAL_ID_LEN} characters"),
        )),
    }
}

/// The logical id a `{ref: logicalId}` names.
fn reference(v: Option<&Value>, field: &str) -> Result<String, ApiError> {
    match v {
        Some(Value::Object(o)) => logical_id(o.get("ref"), &format!("{field}.ref")),
        _ => Err(ApiError::invalid(field, "must be {\"ref\": <logical id>}")),
    }
}

/// Parses and validates a deploy body (nothing is written).
pub fn parse_request(body: Value) -> Result<DeployRequest, ApiError> {
    let Value::Object(body) = body else {
        return Err(ApiError::invalid("body", "must be a JSON object"));
    };
    let project = match body.get("project") {
        Some(Value::Object(p)) => logical_id(p.get("logicalId"), "project.logicalId")?,
        _ => return Err(ApiError::invalid("project", "is required (an object)")),
    };
    let items = match body.get("resources") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.len() <= MAX_RESOURCES => items.clone(),
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid(
                "resources",
                format!("must have at most {MAX_RESOURCES} items"),
            ));
        }
        Some(_) => return Err(ApiError::invalid("resources", "must be an array")),
    };
    let mut resources = Vec::with_capacity(items.len());
    let mut seen = HashSet::new();
    for (i, item) in items.into_iter().enumerate() {
        let field = format!("resources[{i}]");
        let Value::Object(mut item) = item else {
            return Err(ApiError::invalid(&field, "must be an object"));
        };
        let id = logical_id(item.get("logicalId"), &format!("{field}.logicalId"))?;
        let resource_type = match item.get("type").and_then(Value::as_str) {
            Some(CHECK) => CHECK,
            Some(ALERT_CHANNEL) => ALERT_CHANNEL,
            Some(SUBSCRIPTION) => SUBSCRIPTION,
            Some(other) => {
                return Err(ApiError::invalid(
                    &format!("{field}.type"),
                    format!(
                        "{other:?} resources are not supported by this version (supported: {CHECK}, {ALERT_CHANNEL}, {SUBSCRIPTION})"
                    ),
                ));
            }
            None => return Err(ApiError::invalid(&format!("{field}.type"), "is required")),
        };
        if !seen.insert((resource_type, id.clone())) {
            return Err(ApiError::invalid(
                &format!("{field}.logicalId"),
                format!("{id:?} is declared twice as a {resource_type}"),
            ));
        }
        let payload = match item.remove("payload") {
            Some(Value::Object(p)) => p,
            _ => {
                return Err(ApiError::invalid(
                    &format!("{field}.payload"),
                    "must be an object",
                ));
            }
        };
        resources.push(Resource {
            resource_type,
            logical_id: id,
            payload,
        });
    }
    let declared = |t: &str, id: &str| seen.contains(&(t, id.to_owned()));
    for (i, r) in resources.iter().enumerate() {
        let field = format!("resources[{i}].payload");
        let prefixed = |e: ApiError| ApiError::new(e.status, format!("{field}.{}", e.message));
        match r.resource_type {
            CHECK => {
                match r.payload.get("checkType").and_then(Value::as_str) {
                    Some(t) if t == CheckType::Heartbeat.as_str() => {}
                    other => {
                        return Err(ApiError::invalid(
                            &format!("{field}.checkType"),
                            format!(
                                "only HEARTBEAT checks can be deployed by this version (got {})",
                                other.unwrap_or("none")
                            ),
                        ));
                    }
                }
                normalize_heartbeat(check_body(&r.payload, Vec::new()), None, "validation")
                    .map_err(prefixed)?;
            }
            ALERT_CHANNEL => {
                normalize_channel(Value::Object(r.payload.clone()), None).map_err(prefixed)?;
            }
            _ => {
                let channel = reference(
                    r.payload.get("alertChannelId"),
                    &format!("{field}.alertChannelId"),
                )?;
                if !declared(ALERT_CHANNEL, &channel) {
                    return Err(ApiError::invalid(
                        &format!("{field}.alertChannelId.ref"),
                        format!("no alert-channel {channel:?} in this deploy"),
                    ));
                }
                let check = reference(r.payload.get("checkId"), &format!("{field}.checkId"))?;
                if !declared(CHECK, &check) {
                    return Err(ApiError::invalid(
                        &format!("{field}.checkId.ref"),
                        format!("no check {check:?} in this deploy"),
                    ));
                }
                match r.payload.get("activated") {
                    None | Some(Value::Null) | Some(Value::Bool(_)) => {}
                    Some(_) => {
                        return Err(ApiError::invalid(
                            &format!("{field}.activated"),
                            "must be a boolean",
                        ));
                    }
                }
            }
        }
    }
    Ok(DeployRequest { project, resources })
}

/// The check body of a check resource with its declared subscriptions; fields the
/// vendor CLI sends that do not belong to the check document are dropped.
fn check_body(payload: &Map<String, Value>, subs: Vec<Value>) -> Value {
    let mut body = payload.clone();
    for k in ["groupId", "member", "alertChannelSubscriptions"] {
        body.remove(k);
    }
    body.insert("alertChannelSubscriptions".into(), Value::Array(subs));
    Value::Object(body)
}

/// The diff of a deploy against what the project has now.
fn plan(req: &DeployRequest, existing: &[ResourceRecord]) -> Vec<DiffEntry> {
    let now: HashMap<(&str, &str), &ResourceRecord> = existing
        .iter()
        .map(|r| ((r.resource_type.as_str(), r.logical_id.as_str()), r))
        .collect();
    let mut diff = Vec::new();
    let mut declared = HashSet::new();
    for r in &req.resources {
        declared.insert((r.resource_type, r.logical_id.as_str()));
        let old = now.get(&(r.resource_type, r.logical_id.as_str()));
        diff.push(DiffEntry {
            resource_type: r.resource_type.to_owned(),
            logical_id: r.logical_id.clone(),
            physical_id: old.map_or(Value::Null, |o| physical_json(o)),
            action: if old.is_some() { "UPDATE" } else { "CREATE" },
        });
    }
    for r in existing {
        if !declared.contains(&(r.resource_type.as_str(), r.logical_id.as_str())) {
            diff.push(DiffEntry {
                resource_type: r.resource_type.clone(),
                logical_id: r.logical_id.clone(),
                physical_id: physical_json(r),
                action: "DELETE",
            });
        }
    }
    diff
}

/// A physical id as the diff shows it: channel ids are numbers.
fn physical_json(r: &ResourceRecord) -> Value {
    match (r.resource_type.as_str(), r.physical_id.parse::<i64>()) {
        (ALERT_CHANNEL, Ok(n)) => json!(n),
        _ => json!(r.physical_id),
    }
}

/// The diff a deploy would make, without changing anything.
pub async fn dry_run(
    ctx: &AppState,
    account_id: Uuid,
    req: &DeployRequest,
) -> Result<Vec<DiffEntry>, ApiError> {
    let existing = ctx
        .store
        .project_resources(account_id, &req.project)
        .await?;
    Ok(plan(req, &existing))
}

/// Applies a deploy; returns its diff with the physical ids.
pub async fn deploy(
    ctx: &AppState,
    account_id: Uuid,
    req: &DeployRequest,
) -> Result<Vec<DiffEntry>, ApiError> {
    let _serial = DEPLOYS.lock().await;
    let existing = ctx
        .store
        .project_resources(account_id, &req.project)
        .await?;
    let mut diff = plan(req, &existing);
    let old: HashMap<(String, String), String> = existing
        .iter()
        .map(|r| {
            (
                (r.resource_type.clone(), r.logical_id.clone()),
                r.physical_id.clone(),
            )
        })
        .collect();
    let old_id = |t: &str, id: &str| old.get(&(t.to_owned(), id.to_owned())).cloned();

    // Deletes first, so that a check or channel renamed in the project does not clash.
    for d in diff.iter().filter(|d| d.action == "DELETE") {
        let physical = old_id(&d.resource_type, &d.logical_id).unwrap_or_default();
        remove_physical(ctx, account_id, &d.resource_type, &physical).await?;
        ctx.store
            .delete_project_resource(account_id, &req.project, &d.resource_type, &d.logical_id)
            .await?;
    }

    let mut physical: HashMap<(&str, String), String> = HashMap::new();
    for r in req
        .resources
        .iter()
        .filter(|r| r.resource_type == ALERT_CHANNEL)
    {
        let body = Value::Object(r.payload.clone());
        let current = match old_id(ALERT_CHANNEL, &r.logical_id).and_then(|p| p.parse().ok()) {
            Some(id) => ctx.store.get_channel(account_id, id).await?,
            None => None,
        };
        let id = match current {
            Some(current) => {
                let channel = normalize_channel(body, Some(&current))?;
                match ctx
                    .store
                    .update_channel(account_id, current.id, &channel, now_ms())
                    .await?
                {
                    Some(c) => c.id,
                    None => return Err(ApiError::not_found("alert channel vanished")),
                }
            }
            None => {
                let channel = normalize_channel(body, None)?;
                ctx.store
                    .create_channel(account_id, &channel, now_ms())
                    .await?
                    .id
            }
        };
        physical.insert((ALERT_CHANNEL, r.logical_id.clone()), id.to_string());
    }

    let mut subs_of: HashMap<String, Vec<Value>> = HashMap::new();
    let mut sub_ids = Vec::new();
    for r in req
        .resources
        .iter()
        .filter(|r| r.resource_type == SUBSCRIPTION)
    {
        let channel = reference(r.payload.get("alertChannelId"), "alertChannelId")?;
        let check = reference(r.payload.get("checkId"), "checkId")?;
        let Some(channel_id) = physical
            .get(&(ALERT_CHANNEL, channel.clone()))
            .and_then(|p| p.parse::<i64>().ok())
        else {
            return Err(ApiError::invalid(
                "alertChannelId.ref",
                format!("no alert-channel {channel:?}"),
            ));
        };
        let activated = r
            .payload
            .get("activated")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        subs_of
            .entry(check.clone())
            .or_default()
            .push(json!({"alertChannelId": channel_id, "activated": activated}));
        sub_ids.push((r.logical_id.clone(), channel_id, check));
    }

    for r in req.resources.iter().filter(|r| r.resource_type == CHECK) {
        let body = check_body(
            &r.payload,
            subs_of.remove(&r.logical_id).unwrap_or_default(),
        );
        let current = match old_id(CHECK, &r.logical_id).and_then(|p| Uuid::parse_str(&p).ok()) {
            Some(id) => ctx
                .store
                .get_check(account_id, id)
                .await?
                .filter(|c| c.check_type == CheckType::Heartbeat),
            None => None,
        };
        let (stored, _) = match current {
            Some(current) => update_heartbeat_check(ctx, current, body).await?,
            None => create_heartbeat_check(ctx, account_id, body, false).await?,
        };
        physical.insert((CHECK, r.logical_id.clone()), stored.id.to_string());
    }
    for (logical, channel_id, check) in sub_ids {
        let check_id = physical.get(&(CHECK, check)).cloned().unwrap_or_default();
        physical.insert((SUBSCRIPTION, logical), format!("{channel_id}:{check_id}"));
    }

    for r in &req.resources {
        let Some(p) = physical.get(&(r.resource_type, r.logical_id.clone())) else {
            continue;
        };
        let record = ResourceRecord {
            resource_type: r.resource_type.to_owned(),
            logical_id: r.logical_id.clone(),
            physical_id: p.clone(),
        };
        ctx.store
            .put_project_resource(account_id, &req.project, &record)
            .await?;
        if let Some(d) = diff
            .iter_mut()
            .find(|d| d.resource_type == r.resource_type && d.logical_id == r.logical_id)
        {
            d.physical_id = physical_json(&record);
        }
    }
    Ok(diff)
}

/// Deletes the physical object of a resource (a subscription goes with its check's
/// update or deletion).
async fn remove_physical(
    ctx: &AppState,
    account_id: Uuid,
    resource_type: &str,
    physical: &str,
) -> Result<(), ApiError> {
    match resource_type {
        CHECK => {
            if let Ok(id) = Uuid::parse_str(physical)
                && let Some(sessions) = ctx.store.delete_check(account_id, id).await?
            {
                ctx.heartbeats.remove(id).await;
                for session in sessions {
                    let dir = ctx.data_dir.join("artifacts").join(session.to_string());
                    if let Err(e) = tokio::fs::remove_dir_all(&dir).await
                        && e.kind() != std::io::ErrorKind::NotFound
                    {
                        tracing::warn!(path = %dir.display(), error = %e, "cannot remove artifacts of a deleted check");
                    }
                }
            }
        }
        ALERT_CHANNEL => {
            if let Ok(id) = physical.parse::<i64>() {
                ctx.store.delete_channel(account_id, id).await?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Deletes every resource of a project (with `preserve`, only forgets them: they stay
/// as account-level objects; with `dry_run`, changes nothing); returns the diff.
pub async fn destroy(
    ctx: &AppState,
    account_id: Uuid,
    project: &str,
    preserve: bool,
    dry_run: bool,
) -> Result<Vec<DiffEntry>, ApiError> {
    let _serial = DEPLOYS.lock().await;
    let existing = ctx.store.project_resources(account_id, project).await?;
    let diff = existing
        .iter()
        .map(|r| DiffEntry {
            resource_type: r.resource_type.clone(),
            logical_id: r.logical_id.clone(),
            physical_id: physical_json(r),
            action: "DELETE",
        })
        .collect();
    if dry_run {
        return Ok(diff);
    }
    for r in &existing {
        if !preserve {
            remove_physical(ctx, account_id, &r.resource_type, &r.physical_id).await?;
        }
        ctx.store
            .delete_project_resource(account_id, project, &r.resource_type, &r.logical_id)
            .await?;
    }
    Ok(diff)
}
