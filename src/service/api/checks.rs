//! `/v1/checks`: create and update checks of every type the public API knows
//! (`/v1/checks/<type>` from [`CHECK_KINDS`], plus the generic `POST /v1/checks` and
//! `PUT /v1/checks/{id}`), list with filters, read and delete. Answers show the stored
//! document with hidden environment variable values masked. Heartbeat checks are
//! created and updated by `api::heartbeats` (the generic routes hand them over) and
//! shown with their ping URL and alert channel subscriptions.

use crate::service::api::routes::{Area, Routes};
use std::collections::HashSet;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use super::extract::{ApiJson, Paging, parse_id};
use super::heartbeats;
use crate::model::CheckType;
use crate::service::auth::ApiAuth;
use crate::service::check_doc::{
    MAX_NAME_LEN, MAX_TAG_LEN, MAX_TAGS, interval_ms, normalize_check,
};
use crate::service::check_kinds::{CHECK_KINDS, kind_of};
use crate::service::check_secrets;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::scheduler::next_slot;
use crate::service::store::{
    CheckFilter, CheckRecord, CheckStatus, CheckWrite, ScheduleWrite, now_ms,
};

pub fn routes() -> Routes {
    let mut routes = Routes::new(Area::Public)
        .get("/v1/checks", list)
        .post("/v1/checks", create_any)
        .get("/v1/checks/{id}", get_one)
        .put("/v1/checks/{id}", update_any)
        .delete("/v1/checks/{id}", delete);
    for kind in CHECK_KINDS {
        let check_type = kind.check_type;
        let Some(segment) = kind.segment else {
            continue;
        };
        routes =
            routes
                .post(
                    &format!("/v1/checks/{segment}"),
                    move |State(ctx): State<AppState>,
                          auth: ApiAuth,
                          ApiJson(body): ApiJson<Value>| async move {
                        create(&ctx, &auth, check_type, body).await
                    },
                )
                .put(
                    &format!("/v1/checks/{segment}/{{id}}"),
                    move |State(ctx): State<AppState>,
                          auth: ApiAuth,
                          Path(id): Path<String>,
                          ApiJson(body): ApiJson<Value>| async move {
                        update(&ctx, &auth, &id, Some(check_type), body).await
                    },
                );
    }
    routes
}

/// The check as the API shows it: the stored document plus id and timestamps, with the
/// values of secret and locked environment variables masked.
pub fn check_json(c: &CheckRecord) -> Value {
    let mut doc = match &c.document {
        Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    check_secrets::mask(&mut doc);
    doc.insert("id".into(), json!(c.id));
    doc.insert("checkType".into(), json!(c.check_type));
    doc.insert("created_at".into(), json!(c.created_at));
    doc.insert("updated_at".into(), json!(c.updated_at));
    Value::Object(doc)
}

/// The schedule of an activated check: its first run is the next slot after `now`.
fn schedule_for(c: &CheckWrite, id: Uuid, now: i64) -> Option<ScheduleWrite> {
    c.activated.then(|| {
        let interval = interval_ms(c.frequency, c.frequency_offset);
        ScheduleWrite {
            interval_ms: interval,
            next_run_at: next_slot(id, interval, now),
        }
    })
}

async fn known_slugs(ctx: &AppState, account_id: Uuid) -> Result<HashSet<String>, ApiError> {
    Ok(ctx
        .store
        .list_private_locations(account_id)
        .await?
        .into_iter()
        .map(|l| l.slug_name)
        .collect())
}

/// `POST /v1/checks/<type>`.
async fn create(
    ctx: &AppState,
    auth: &ApiAuth,
    check_type: CheckType,
    body: Value,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let slugs = known_slugs(ctx, auth.account_id).await?;
    let check = normalize_check(check_type, body, None, &slugs)?;
    let id = Uuid::new_v4();
    let now = now_ms();
    let stored = ctx
        .store
        .insert_check(
            auth.account_id,
            id,
            &check,
            schedule_for(&check, id, now),
            now,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(check_json(&stored))))
}

/// `POST /v1/checks` (deprecated in the reference): the type comes from the body.
async fn create_any(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    RawQuery(raw): RawQuery,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let check_type = match body.get("checkType") {
        None | Some(Value::Null) => return Err(ApiError::invalid("checkType", "is required")),
        Some(Value::String(name)) => CheckType::parse(name).ok_or_else(|| {
            ApiError::invalid("checkType", format!("unknown check type {name:?}"))
        })?,
        Some(_) => return Err(ApiError::invalid("checkType", "must be a string")),
    };
    if check_type == CheckType::Heartbeat {
        let auto_assign = heartbeats::auto_assign_alerts(raw.as_deref())?;
        return heartbeats::create(&ctx, &auth, body, auto_assign).await;
    }
    create(&ctx, &auth, check_type, body).await
}

/// `PUT /v1/checks/{id}`: the type is the stored check's.
async fn update_any(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    update(&ctx, &auth, &id, None, body).await
}

/// Updates a check; `route_type` is the type named by a typed route, which must be the
/// stored check's.
async fn update(
    ctx: &AppState,
    auth: &ApiAuth,
    id: &str,
    route_type: Option<CheckType>,
    body: Value,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(id, "id")?;
    let Some(existing) = ctx.store.get_check(auth.account_id, id).await? else {
        return Err(ApiError::not_found("No such check."));
    };
    if let Some(route_type) = route_type
        && existing.check_type != route_type
    {
        let generic = format!("/v1/checks/{id}");
        let segment = match existing.check_type {
            CheckType::Heartbeat => Some("heartbeat"),
            other => kind_of(other).and_then(|k| k.segment),
        };
        let route = segment
            .map(|s| format!("/v1/checks/{s}/{id} or {generic}"))
            .unwrap_or(generic);
        return Err(ApiError::invalid(
            "checkType",
            format!(
                "this check is a {} check, not {route_type}; update it through {route}",
                existing.check_type
            ),
        ));
    }
    if existing.check_type == CheckType::Heartbeat {
        return heartbeats::update(ctx, auth, existing, body).await;
    }
    let slugs = known_slugs(ctx, auth.account_id).await?;
    let check = normalize_check(existing.check_type, body, Some(&existing.document), &slugs)?;
    let now = now_ms();
    let Some(stored) = ctx
        .store
        .update_check(
            auth.account_id,
            id,
            &check,
            schedule_for(&check, id, now),
            now,
        )
        .await?
    else {
        return Err(ApiError::not_found("No such check."));
    };
    Ok(Json(check_json(&stored)))
}

/// Check types of the reference's `checkType` filter that this version has no checks
/// of: filtering on them finds nothing rather than failing.
const FOREIGN_TYPES: [&str; 3] = ["TRACEROUTE", "SSL", "GRPC"];
/// Longest `search` of the list.
const MAX_SEARCH_LEN: usize = MAX_NAME_LEN;

/// The query of `GET /v1/checks`: `limit`, `page`, `checkType`, `tag` (repeatable, any
/// of), `search` (case-insensitive name substring), `status` (passing, failing,
/// degraded: see [`CheckStatus`]). Other reference parameters are accepted and ignored.
#[derive(Debug, Default, PartialEq)]
pub struct ListQuery {
    pub paging: (i64, i64),
    /// None: a foreign type was asked for, nothing can match.
    pub filter: Option<CheckFilter>,
}

impl ListQuery {
    pub fn parse(raw: Option<&str>) -> Result<ListQuery, ApiError> {
        let mut paging = Paging::default();
        let mut filter = CheckFilter::default();
        let mut foreign = false;
        for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match key.as_ref() {
                "limit" => paging.limit = Some(integer("limit", &value)?),
                "page" => paging.page = Some(integer("page", &value)?),
                "checkType" => match CheckType::parse(&value) {
                    Some(t) => filter.check_type = Some(t),
                    None if FOREIGN_TYPES.contains(&value.as_ref()) => foreign = true,
                    None => {
                        return Err(ApiError::invalid(
                            "checkType",
                            format!("unknown check type {:?}", value.as_ref()),
                        ));
                    }
                },
                "tag" => {
                    if value.is_empty() || value.len() > MAX_TAG_LEN {
                        return Err(ApiError::invalid(
                            "tag",
                            format!("must be 1 to {MAX_TAG_LEN} bytes"),
                        ));
                    }
                    if filter.tags_any.len() >= MAX_TAGS {
                        return Err(ApiError::invalid("tag", format!("at most {MAX_TAGS} tags")));
                    }
                    filter.tags_any.push(value.into_owned());
                }
                "search" => {
                    if value.len() > MAX_SEARCH_LEN {
                        return Err(ApiError::invalid(
                            "search",
                            format!("must be at most {MAX_SEARCH_LEN} bytes"),
                        ));
                    }
                    filter.name_contains = (!value.is_empty()).then(|| value.into_owned());
                }
                "status" => match CheckStatus::parse(&value) {
                    Some(status) => filter.status = Some(status),
                    None => {
                        return Err(ApiError::invalid(
                            "status",
                            "must be one of passing, failing, degraded",
                        ));
                    }
                },
                // Validated as the reference types them; Outpost has no check groups.
                "applyGroupSettings" if !["true", "false"].contains(&value.as_ref()) => {
                    return Err(ApiError::invalid(
                        "applyGroupSettings",
                        "must be true or false",
                    ));
                }
                "apiCheckUrlFilterPattern" if value.is_empty() => {
                    return Err(ApiError::invalid(
                        "apiCheckUrlFilterPattern",
                        "must not be empty",
                    ));
                }
                _ => {}
            }
        }
        Ok(ListQuery {
            paging: paging.resolve()?,
            filter: (!foreign).then_some(filter),
        })
    }
}

fn integer(field: &str, value: &str) -> Result<i64, ApiError> {
    value
        .trim()
        .parse()
        .map_err(|_| ApiError::invalid(field, "must be an integer"))
}

async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query = ListQuery::parse(raw.as_deref())?;
    let (limit, offset) = query.paging;
    let Some(filter) = query.filter else {
        return Ok(Json(json!([])));
    };
    let checks = ctx
        .store
        .list_checks_matching(auth.account_id, &filter, limit, offset)
        .await?;
    Ok(Json(Value::Array(
        render_checks(&ctx, auth.account_id, &checks).await?,
    )))
}

async fn get_one(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "id")?;
    match ctx.store.get_check(auth.account_id, id).await? {
        Some(c) => {
            let mut shown = render_checks(&ctx, auth.account_id, std::slice::from_ref(&c)).await?;
            Ok(Json(shown.pop().unwrap_or(Value::Null)))
        }
        None => Err(ApiError::not_found("No such check.")),
    }
}

/// Checks as the API shows them: [`check_json`], and for heartbeat checks their ping
/// URL and alert channel subscriptions.
async fn render_checks(
    ctx: &AppState,
    account_id: Uuid,
    checks: &[CheckRecord],
) -> Result<Vec<Value>, ApiError> {
    let heartbeat_ids: Vec<Uuid> = checks
        .iter()
        .filter(|c| c.check_type == CheckType::Heartbeat)
        .map(|c| c.id)
        .collect();
    let subs = if heartbeat_ids.is_empty() {
        Default::default()
    } else {
        ctx.store
            .check_subscriptions(account_id, &heartbeat_ids)
            .await?
    };
    Ok(checks
        .iter()
        .map(|c| {
            if c.check_type == CheckType::Heartbeat {
                let s = subs.get(&c.id).map(Vec::as_slice).unwrap_or(&[]);
                heartbeats::heartbeat_check_json(&ctx.ping_url, c, s)
            } else {
                check_json(c)
            }
        })
        .collect())
}

async fn delete(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id, "id")?;
    let Some(sessions) = ctx.store.delete_check(auth.account_id, id).await? else {
        return Err(ApiError::not_found("No such check."));
    };
    ctx.heartbeats.remove(id).await;
    for session in sessions {
        let dir = ctx.data_dir.join("artifacts").join(session.to_string());
        if let Err(e) = tokio::fs::remove_dir_all(&dir).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %dir.display(), error = %e, "cannot remove artifacts of a deleted check");
        }
    }
    Ok(StatusCode::NO_CONTENT)
}
