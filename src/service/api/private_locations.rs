//! `/v1/private-locations`: private locations of the account and their agent keys.
//!
//! - A key's plaintext (`rawKey`) appears only in the answer of
//!   `POST /v1/private-locations/{id}/keys`; everywhere else keys show `maskedKey`,
//!   and `rawKey` (required by the reference's `privateLocationKeys`) holds the
//!   masked key too. Times are calendar dates (`format: date` in the reference).
//!   At most [`MAX_ACTIVE_LOCATION_KEYS`] keys are active: a third is a 409.
//! - A location named by checks (`privateLocations`) is not deleted: 409 naming how
//!   many checks use it; remove it from those checks first.
//! - `icon` is accepted but not stored (always `"location"`).
//! - `proxyUrl` (create and update): the HTTP proxy the location's agents send API
//!   checks through (only API checks: URL, TCP, DNS and ICMP monitors and the agent's
//!   own traffic to the service never use it). `null`, `""` or absent: none (an update
//!   without it removes the proxy, as it replaces the location). Otherwise
//!   `http://[user[:password]@]host[:port]` (port 80 by default) or `https://...`
//!   (TLS to the proxy, port 443 by default), no path, query or fragment, at most
//!   [`crate::model::proxy::MAX_PROXY_URL_LEN`] bytes (2048); anything else is a 400 naming
//!   `proxyUrl` that never quotes the URL. Answers show the password masked
//!   (`http://user:********@proxy:3128`); an update that sends that masked form back
//!   for the same scheme, user, host and port keeps the stored password (as masked
//!   alert channel secrets do). Agents get the URL with the password with each job
//!   they lease (`proxyUrl` of `LeasedJob`), so a change applies to jobs leased after
//!   it.
//! - `lastSeen`, `agentCount`, `minAgentVersion` and `runningAgents` come from the
//!   agents that said HELLO for the location (Outpost records HELLO, not every poll).
//! - Another account's location is a 404, like an unknown one.

use crate::service::api::routes::{Area, Routes};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::calendar_date;
use super::extract::{ApiJson, parse_id};
use crate::model::ProxyUrl;
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::store::{
    AgentRecord, LocationDeletion, LocationKeyInfo, LocationRecord, MAX_ACTIVE_LOCATION_KEYS,
    now_ms, to_time, valid_slug,
};

/// Longest location name.
pub const MAX_LOCATION_NAME_LEN: usize = 255;
/// Longest slug name the reference allows.
pub const MAX_REFERENCE_SLUG_LEN: usize = 30;
/// Longest `icon` accepted.
const MAX_ICON_LEN: usize = 64;
/// Widest metrics window the reference allows (15 days).
const MAX_METRICS_WINDOW_MS: i64 = 15 * 24 * 3600 * 1000;

const NOT_FOUND: &str = "No such private location.";

pub fn routes() -> Routes {
    Routes::new(Area::Public)
        .get("/v1/private-locations", list)
        .post("/v1/private-locations", create)
        .get("/v1/private-locations/{id}", get_one)
        .put("/v1/private-locations/{id}", update)
        .delete("/v1/private-locations/{id}", remove)
        .post("/v1/private-locations/{id}/keys", create_key)
        .delete("/v1/private-locations/{id}/keys/{key_id}", revoke_key)
        .get("/v1/private-locations/{id}/metrics", metrics)
}

/// A key as listed: masked, never the plaintext.
fn key_json(k: &LocationKeyInfo) -> Value {
    json!({
        "id": k.id,
        "rawKey": k.masked,
        "maskedKey": k.masked,
        "created_at": calendar_date(k.created_at),
        "updated_at": Value::Null,
    })
}

/// `commonPrivateLocationSchemaResponse`.
fn location_json(r: &LocationRecord, keys: &[LocationKeyInfo]) -> Map<String, Value> {
    let l = &r.location;
    let mut m = Map::new();
    m.insert("id".into(), json!(l.id));
    m.insert("name".into(), json!(l.name));
    m.insert("slugName".into(), json!(l.slug_name));
    m.insert("icon".into(), json!("location"));
    m.insert("created_at".into(), calendar_date(l.created_at));
    m.insert("updated_at".into(), calendar_date(r.updated_at));
    m.insert(
        "keys".into(),
        Value::Array(keys.iter().map(key_json).collect()),
    );
    m.insert(
        "proxyUrl".into(),
        json!(r.proxy_url.as_ref().map(ProxyUrl::masked)),
    );
    m
}

/// Numeric parts of a version (`1.2.3-beta` -> [1, 2, 3]), for ordering.
fn version_key(v: &str) -> Vec<u64> {
    v.split(['.', '-', '+'])
        .map_while(|p| p.parse::<u64>().ok())
        .collect()
}

/// `privateLocationsSchema`: the common fields plus what the agents' HELLOs tell.
fn location_with_agents(
    r: &LocationRecord,
    keys: &[LocationKeyInfo],
    agents: &[AgentRecord],
) -> Value {
    let mut m = location_json(r, keys);
    let last_seen = agents.iter().map(|a| a.last_seen_at).max();
    let min_version = agents
        .iter()
        .map(|a| a.version.as_str())
        .min_by_key(|v| version_key(v));
    let current = version_key(crate::VERSION);
    let mut versions: Vec<(&str, Vec<&AgentRecord>)> = Vec::new();
    for a in agents {
        match versions.iter_mut().find(|(v, _)| *v == a.version) {
            Some((_, list)) => list.push(a),
            None => versions.push((&a.version, vec![a])),
        }
    }
    let running: Vec<Value> = versions
        .iter()
        .map(|(v, list)| {
            json!({
                "version": v,
                "isOutdated": version_key(v) < current,
                "count": list.len(),
                // The reference's RunningAgentInfo: `id` and `lastSeenAt` (strings);
                // `firstSeenAt` is Outpost's.
                "agents": list.iter().map(|a| json!({
                    "id": a.id,
                    "lastSeenAt": a.last_seen_at,
                    "firstSeenAt": a.first_seen_at,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    m.insert("lastSeen".into(), json!(last_seen.map(calendar_date)));
    m.insert("agentCount".into(), json!(agents.len()));
    m.insert("minAgentVersion".into(), json!(min_version));
    m.insert("runningAgents".into(), Value::Array(running));
    Value::Object(m)
}

async fn render(ctx: &AppState, r: &LocationRecord) -> Result<Value, ApiError> {
    let keys = ctx.store.list_location_keys(r.location.id).await?;
    let agents = ctx.store.location_agents(r.location.id).await?;
    Ok(location_with_agents(r, &keys, &agents))
}

/// The account's location `id` (a 404 for another account's).
async fn owned(ctx: &AppState, auth: &ApiAuth, id: &str) -> Result<LocationRecord, ApiError> {
    let id = parse_id(id, "id")?;
    ctx.store
        .location_record(auth.account_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found(NOT_FOUND))
}

fn object(body: Value) -> Result<Map<String, Value>, ApiError> {
    match body {
        Value::Object(m) => Ok(m),
        _ => Err(ApiError::bad_request("the body must be a JSON object")),
    }
}

fn name_field(body: &Map<String, Value>) -> Result<String, ApiError> {
    match body.get("name") {
        None | Some(Value::Null) => Err(ApiError::invalid("name", "is required")),
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err(ApiError::invalid("name", "must not be empty"))
        }
        Some(Value::String(s)) if s.len() > MAX_LOCATION_NAME_LEN => Err(ApiError::invalid(
            "name",
            format!("must be at most {MAX_LOCATION_NAME_LEN} bytes"),
        )),
        Some(Value::String(s)) => Ok(s.trim().to_owned()),
        Some(_) => Err(ApiError::invalid("name", "must be a string")),
    }
}

/// `icon`: accepted, not stored.
fn icon_field(body: &Map<String, Value>) -> Result<(), ApiError> {
    match body.get("icon") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.len() <= MAX_ICON_LEN => {}
        Some(Value::String(_)) => {
            return Err(ApiError::invalid(
                "icon",
                format!("must be at most {MAX_ICON_LEN} bytes"),
            ));
        }
        Some(_) => return Err(ApiError::invalid("icon", "must be a string")),
    }
    Ok(())
}

/// `proxyUrl`: `None` for null, `""` or absent. A masked password is still the mask
/// here: see [`ProxyUrl::keep_password_of`].
fn proxy_field(body: &Map<String, Value>) -> Result<Option<ProxyUrl>, ApiError> {
    match body.get("proxyUrl") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => ProxyUrl::parse(s)
            .map(Some)
            .map_err(|e| ApiError::invalid("proxyUrl", e)),
        Some(_) => Err(ApiError::invalid("proxyUrl", "must be a string or null")),
    }
}

/// Whether `slug` looks like a cloud region (`us-east-1`, `eu-central-1`, ...), which
/// the reference refuses as a slug name.
fn region_like(slug: &str) -> bool {
    let parts: Vec<&str> = slug.split('-').collect();
    let (area, rest) = match parts.as_slice() {
        ["us", "gov", rest @ ..] => ("us", rest),
        [area, rest @ ..] => (*area, rest),
        [] => return false,
    };
    const AREAS: [&str; 8] = ["us", "ap", "ca", "cn", "eu", "sa", "af", "me"];
    const DIRECTIONS: [&str; 9] = [
        "central",
        "north",
        "south",
        "east",
        "west",
        "northeast",
        "northwest",
        "southeast",
        "southwest",
    ];
    AREAS.contains(&area)
        && rest.len() >= 2
        && DIRECTIONS.contains(&rest[0])
        && rest[1].bytes().next().is_some_and(|b| b.is_ascii_digit())
}

fn slug_field(body: &Map<String, Value>) -> Result<String, ApiError> {
    let slug = match body.get("slugName") {
        None | Some(Value::Null) => return Err(ApiError::invalid("slugName", "is required")),
        Some(Value::String(s)) => s,
        Some(_) => return Err(ApiError::invalid("slugName", "must be a string")),
    };
    if slug.len() > MAX_REFERENCE_SLUG_LEN || !valid_slug(slug) {
        return Err(ApiError::invalid(
            "slugName",
            format!(
                "must be 1 to {MAX_REFERENCE_SLUG_LEN} lowercase letters, digits or dashes, not starting with a dash"
            ),
        ));
    }
    if region_like(slug) {
        return Err(ApiError::invalid(
            "slugName",
            "must not look like a cloud region (such as us-east-1)",
        ));
    }
    Ok(slug.clone())
}

async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        if key == "versions" && !matches!(value.as_ref(), "true" | "false") {
            return Err(ApiError::invalid("versions", "must be true or false"));
        }
    }
    let records = ctx.store.list_location_records(auth.account_id).await?;
    let mut out = Vec::with_capacity(records.len());
    for r in &records {
        out.push(render(&ctx, r).await?);
    }
    Ok(Json(Value::Array(out)))
}

async fn create(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = object(body)?;
    let name = name_field(&body)?;
    let slug = slug_field(&body)?;
    icon_field(&body)?;
    let proxy = proxy_field(&body)?
        .map(|p| p.keep_password_of(None))
        .transpose()
        .map_err(|e| ApiError::invalid("proxyUrl", e))?;
    let record = ctx
        .store
        .create_private_location_with_proxy(auth.account_id, &name, &slug, proxy.as_ref())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(Value::Object(location_json(&record, &[]))),
    ))
}

async fn get_one(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = owned(&ctx, &auth, &id).await?;
    Ok(Json(render(&ctx, &record).await?))
}

async fn update(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "id")?;
    let body = object(body)?;
    let name = name_field(&body)?;
    icon_field(&body)?;
    let mut proxy = proxy_field(&body)?;
    if body.contains_key("slugName") {
        return Err(ApiError::invalid(
            "slugName",
            "cannot be changed; checks name the location by it",
        ));
    }
    if let Some(sent) = proxy.take_if(|p| p.has_masked_password()) {
        // The masked form sent back: the stored password stays.
        let stored = ctx
            .store
            .location_record(auth.account_id, id)
            .await?
            .ok_or_else(|| ApiError::not_found(NOT_FOUND))?;
        proxy = Some(
            sent.keep_password_of(stored.proxy_url.as_ref())
                .map_err(|e| ApiError::invalid("proxyUrl", e))?,
        );
    }
    let record = ctx
        .store
        .update_private_location(auth.account_id, id, &name, proxy.as_ref())
        .await?
        .ok_or_else(|| ApiError::not_found(NOT_FOUND))?;
    let keys = ctx.store.list_location_keys(id).await?;
    Ok(Json(Value::Object(location_json(&record, &keys))))
}

async fn remove(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id, "id")?;
    match ctx
        .store
        .delete_unused_private_location(auth.account_id, id)
        .await?
    {
        LocationDeletion::Deleted => Ok(StatusCode::NO_CONTENT),
        LocationDeletion::NotFound => Err(ApiError::not_found(NOT_FOUND)),
        LocationDeletion::InUse(n) => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "the private location is used by {n} check{}; remove it from their privateLocations first",
                if n == 1 { "" } else { "s" }
            ),
        )),
    }
}

async fn create_key(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    _body: super::extract::IgnoredBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let record = owned(&ctx, &auth, &id).await?;
    let (info, raw) = ctx
        .store
        .create_location_key(record.location.id)
        .await
        .map_err(|e| match e {
            crate::service::store::StoreError::TooManyLocationKeys { .. } => ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "the private location already has {MAX_ACTIVE_LOCATION_KEYS} active keys; delete one first"
                ),
            ),
            e => e.into(),
        })?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "id": info.id,
            "rawKey": raw,
            "maskedKey": info.masked,
            "created_at": calendar_date(info.created_at),
            "updated_at": Value::Null,
        })),
    ))
}

async fn revoke_key(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((id, key_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let record = owned(&ctx, &auth, &id).await?;
    let key_id = parse_id(&key_id, "keyId")?;
    if ctx
        .store
        .revoke_location_key(record.location.id, key_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("No such private location key."))
    }
}

/// A `from`/`to` of the metrics query: UNIX seconds, or an RFC 3339 time.
fn parse_time(field: &str, value: &str) -> Result<i64, ApiError> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<i64>() {
        return secs
            .checked_mul(1000)
            .filter(|ms| DateTime::<Utc>::from_timestamp_millis(*ms).is_some())
            .ok_or_else(|| ApiError::invalid(field, "is out of range"));
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Ok(t.timestamp_millis());
    }
    // The reference types `from`/`to` as `format: date`: a calendar day is its UTC
    // midnight.
    chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp_millis())
        .ok_or_else(|| {
            ApiError::invalid(
                field,
                "must be a UNIX timestamp in seconds, an RFC 3339 time or a date (YYYY-MM-DD)",
            )
        })
}

/// `GET /v1/private-locations/{id}/metrics?from&to`. Outpost keeps no history of its
/// queues, so the answer holds at most one sample: now, when now lies in [from, to].
/// `queueSize` is the number of queued jobs, `oldestScheduledCheckRun` the age in
/// seconds of the oldest queued job (0 with an empty queue). Outpost adds
/// `leasedJobs` (jobs being run by agents) and `agentCount` (agents that said HELLO).
async fn metrics(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let record = owned(&ctx, &auth, &id).await?;
    let mut from = None;
    let mut to = None;
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "from" => from = Some(parse_time("from", &value)?),
            "to" => to = Some(parse_time("to", &value)?),
            _ => {}
        }
    }
    let from = from.ok_or_else(|| ApiError::invalid("from", "is required"))?;
    let to = to.ok_or_else(|| ApiError::invalid("to", "is required"))?;
    if from > to {
        return Err(ApiError::invalid("from", "must not be after to"));
    }
    let now = now_ms();
    if now.saturating_sub(from) > MAX_METRICS_WINDOW_MS {
        return Err(ApiError::invalid("from", "must be less than 15 days ago"));
    }
    let mut out = json!({
        "timestamps": [],
        "queueSize": [],
        "oldestScheduledCheckRun": [],
        "leasedJobs": [],
        "agentCount": [],
    });
    if (from..=to).contains(&now) {
        let queue = ctx.store.location_queue(record.location.id).await?;
        let agents = ctx.store.location_agents(record.location.id).await?;
        let oldest_secs = queue
            .oldest_queued_at
            .map(|t| now.saturating_sub(t).max(0) / 1000)
            .unwrap_or(0);
        out = json!({
            "timestamps": [to_time(now)],
            "queueSize": [queue.queued],
            "oldestScheduledCheckRun": [oldest_secs],
            "leasedJobs": [queue.leased],
            "agentCount": [agents.len()],
        });
    }
    Ok(Json(out))
}
