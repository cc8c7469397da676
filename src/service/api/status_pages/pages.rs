//! `/v1/status-pages` and `/v1/status-pages/{id}`: pages and their cards.
//!
//! - `url` is lowercased and must be a DNS label (letters, digits, dashes, at most 63);
//!   `customDomain` a host name. Both are unique over every account (409).
//! - `themeColors` is null or `{light, dark}`, each with the twelve colors as `#RGB` or
//!   `#RRGGBB` (stored upper case). `isPrivate` (an Outpost extension) defaults to
//!   false on create and to the page's current setting on PUT, so a client of the
//!   reference, whose bodies have no `isPrivate`, never makes a private page public.
//! - PUT replaces the page and its cards: a card sent with the id of one of the page's
//!   cards keeps it; a card without id is new; cards not sent are removed.
//! - List entries carry the latest [`PAGE_INCIDENTS_SHOWN`] incidents affecting the
//!   page's services and its keys (masked); `projectBindings` is unbound.

use std::collections::HashSet;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::fields::{self, MAX_NAME_CHARS, MAX_PAGE_DESCRIPTION_CHARS};
use super::keys::key_json;
use super::{incident_json, service_json};
use crate::service::api::calendar_date;
use crate::service::api::extract::{ApiJson, parse_id};
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::store::{
    CardWrite, Incident, MAX_CARDS_PER_PAGE, MAX_SERVICES_PER_CARD, StatusCard, StatusPage,
    StatusPageKey, StatusPageWrite,
};

const NOT_FOUND: &str = "No such status page.";
/// Incidents shown with each entry of the page list.
pub const PAGE_INCIDENTS_SHOWN: i64 = 10;
/// Longest custom domain.
const MAX_DOMAIN_LEN: usize = 253;
/// The colors of a theme, all required.
const THEME_COLORS: [&str; 12] = [
    "bodyBackgroundColor",
    "headerBackgroundColor",
    "headerFontColor",
    "titleFontColor",
    "bodyFontColor",
    "bodyFontColorMuted",
    "navigationFontColor",
    "linkFontColor",
    "cardBackgroundColor",
    "borderColor",
    "primaryButtonBackgroundColor",
    "primaryButtonFontColor",
];
const THEMES: [&str; 3] = ["LIGHT", "DARK", "AUTO"];

/// Whether `s` is a DNS label: 1 to 63 letters, digits or dashes, no dash at either end.
fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn url_field(body: &Map<String, Value>) -> Result<String, ApiError> {
    let url = fields::name(body, "", "url", 63)?.to_ascii_lowercase();
    if !dns_label(&url) {
        return Err(ApiError::invalid(
            "url",
            "must be 1 to 63 letters, digits or dashes, not starting or ending with a dash",
        ));
    }
    Ok(url)
}

fn domain_field(body: &Map<String, Value>) -> Result<Option<String>, ApiError> {
    let Some(domain) = fields::opt_string(body, "customDomain", MAX_DOMAIN_LEN)? else {
        return Ok(None);
    };
    let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
    if domain.is_empty() {
        return Ok(None);
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if labels.len() < 2 || !labels.iter().all(|l| dns_label(l)) {
        return Err(ApiError::invalid(
            "customDomain",
            "must be a host name such as status.example.com",
        ));
    }
    Ok(Some(domain))
}

/// One theme's colors, upper-cased.
fn theme(value: Option<&Value>, at: &str) -> Result<Value, ApiError> {
    let Some(Value::Object(colors)) = value else {
        return Err(ApiError::invalid(
            at,
            "is required: an object with the twelve theme colors",
        ));
    };
    let mut out = Map::new();
    for name in THEME_COLORS {
        let field = format!("{at}.{name}");
        let Some(Value::String(c)) = colors.get(name) else {
            return Err(ApiError::invalid(
                &field,
                "is required: a color such as #1A2B3C",
            ));
        };
        let hex = c.strip_prefix('#').unwrap_or("");
        if !c.starts_with('#')
            || !matches!(hex.len(), 3 | 6)
            || !hex.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(ApiError::invalid(
                &field,
                "must be a color #RGB or #RRGGBB in hexadecimal",
            ));
        }
        out.insert(name.into(), json!(c.to_ascii_uppercase()));
    }
    Ok(Value::Object(out))
}

/// The presentation fields, normalized, as stored and echoed.
/// The page's settings; `private` is what an absent `isPrivate` means.
fn settings(body: &Map<String, Value>, private: bool) -> Result<Map<String, Value>, ApiError> {
    let mut s = Map::new();
    let theme_colors = match body.get("themeColors") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::Object(t)) => json!({
            "light": theme(t.get("light"), "themeColors.light")?,
            "dark": theme(t.get("dark"), "themeColors.dark")?,
        }),
        Some(_) => {
            return Err(ApiError::invalid(
                "themeColors",
                "must be an object or null",
            ));
        }
    };
    s.insert("themeColors".into(), theme_colors);
    for link in ["logo", "logoDark", "redirectTo", "favicon"] {
        s.insert(link.into(), json!(fields::opt_link(body, link)?));
    }
    let default_theme = fields::opt_enum(
        body,
        "defaultTheme",
        |v| THEMES.iter().find(|t| **t == v).copied(),
        &THEMES,
    )?
    .unwrap_or("AUTO");
    s.insert("defaultTheme".into(), json!(default_theme));
    let version = match body.get("version") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::Number(n)) => Value::Number(n.clone()),
        Some(_) => return Err(ApiError::invalid("version", "must be a number or null")),
    };
    s.insert("version".into(), version);
    s.insert(
        "isPrivate".into(),
        json!(fields::bool_or(body, "isPrivate", private)?),
    );
    Ok(s)
}

fn cards(body: &Map<String, Value>) -> Result<Vec<CardWrite>, ApiError> {
    if !matches!(body.get("cards"), Some(Value::Array(_))) {
        return Err(ApiError::invalid("cards", "is required: an array of cards"));
    }
    let items = fields::array(body, "", "cards", MAX_CARDS_PER_PAGE)?;
    let mut out = Vec::with_capacity(items.len());
    let mut card_ids = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("cards[{i}]");
        let card = fields::item(item, &at)?;
        let name = fields::name(card, &at, "name", MAX_NAME_CHARS)?;
        let id = match card.get("id") {
            None | Some(Value::Null) => None,
            v => Some(fields::uuid(v, &format!("{at}.id"))?),
        };
        if let Some(id) = id
            && !card_ids.insert(id)
        {
            return Err(ApiError::invalid(
                &format!("{at}.id"),
                "names the same card as an earlier entry",
            ));
        }
        if let Some(v) = card.get("statusPageId")
            && !v.is_null()
        {
            fields::uuid(Some(v), &format!("{at}.statusPageId"))?;
        }
        let refs = fields::array(card, &at, "services", MAX_SERVICES_PER_CARD)?;
        let mut service_ids = Vec::with_capacity(refs.len());
        for (j, r) in refs.iter().enumerate() {
            let at = format!("{at}.services[{j}]");
            let r = fields::item(r, &at)?;
            let id = fields::uuid(r.get("id"), &format!("{at}.id"))?;
            if service_ids.contains(&id) {
                return Err(ApiError::invalid(
                    &format!("{at}.id"),
                    "names a service already on this card",
                ));
            }
            service_ids.push(id);
        }
        out.push(CardWrite {
            id,
            name,
            service_ids,
        });
    }
    Ok(out)
}

/// Reads and validates a page body, including that every service of its cards is one
/// of the account's; `private` is what an absent `isPrivate` means.
async fn page_write(
    ctx: &AppState,
    account_id: Uuid,
    body: Value,
    private: bool,
) -> Result<StatusPageWrite, ApiError> {
    let body = fields::object(body)?;
    let page = StatusPageWrite {
        name: fields::name(&body, "", "name", MAX_NAME_CHARS)?,
        url: url_field(&body)?,
        custom_domain: domain_field(&body)?,
        description: fields::opt_string(&body, "description", MAX_PAGE_DESCRIPTION_CHARS)?,
        settings: settings(&body, private)?,
        cards: cards(&body)?,
    };
    let all: Vec<Uuid> = page
        .cards
        .iter()
        .flat_map(|c| c.service_ids.iter().copied())
        .collect();
    let found = ctx
        .store
        .existing_status_service_ids(account_id, &all)
        .await?;
    for (i, card) in page.cards.iter().enumerate() {
        for (j, id) in card.service_ids.iter().enumerate() {
            if !found.contains(id) {
                return Err(ApiError::invalid(
                    &format!("cards[{i}].services[{j}].id"),
                    format!("no service {id} in this account"),
                ));
            }
        }
    }
    Ok(page)
}

fn card_json(c: &StatusCard) -> Value {
    json!({
        "id": c.id,
        "name": c.name,
        "services": c.services.iter().map(service_json).collect::<Vec<_>>(),
        "created_at": calendar_date(c.created_at),
        "updated_at": calendar_date(c.updated_at),
    })
}

/// `StatusPageV2WithIdRead` (a superset of `StatusPageV2WithId`).
fn page_json(p: &StatusPage) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("id".into(), json!(p.id));
    m.insert("accountId".into(), json!(p.account_id));
    m.insert("name".into(), json!(p.name));
    m.insert("description".into(), json!(p.description));
    m.insert("url".into(), json!(p.url));
    m.insert("customDomain".into(), json!(p.custom_domain));
    for key in [
        "themeColors",
        "logo",
        "logoDark",
        "redirectTo",
        "favicon",
        "defaultTheme",
        "version",
        "isPrivate",
    ] {
        let fallback = match key {
            "defaultTheme" => json!("AUTO"),
            "isPrivate" => json!(false),
            _ => Value::Null,
        };
        m.insert(key.into(), p.settings.get(key).cloned().unwrap_or(fallback));
    }
    m.insert(
        "cards".into(),
        Value::Array(p.cards.iter().map(card_json).collect()),
    );
    m.insert("whiteLabel".into(), json!(false));
    m.insert("created_at".into(), calendar_date(p.created_at));
    m.insert("updated_at".into(), calendar_date(p.updated_at));
    m.insert(
        "projectBindings".into(),
        json!({"owner": null, "references": []}),
    );
    m
}

/// `StatusPageV2Read`: the page with its latest incidents and its keys (masked).
fn page_entry_json(p: &StatusPage, incidents: &[Incident], keys: &[StatusPageKey]) -> Value {
    let mut m = page_json(p);
    m.insert(
        "incidents".into(),
        Value::Array(incidents.iter().map(incident_json).collect()),
    );
    m.insert(
        "keys".into(),
        Value::Array(keys.iter().map(key_json).collect()),
    );
    Value::Object(m)
}

pub async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let cursor = fields::cursor(raw.as_deref())?;
    let listing = ctx
        .store
        .list_status_pages(auth.account_id, cursor.next_id, cursor.limit)
        .await?;
    let ids: Vec<Uuid> = listing.entries.iter().map(|p| p.id).collect();
    let incidents = ctx.store.page_incidents(&ids, PAGE_INCIDENTS_SHOWN).await?;
    let keys = ctx.store.keys_of_status_pages(&ids).await?;
    let entries: Vec<Value> = listing
        .entries
        .iter()
        .map(|p| {
            page_entry_json(
                p,
                incidents.get(&p.id).map_or(&[], Vec::as_slice),
                keys.get(&p.id).map_or(&[], Vec::as_slice),
            )
        })
        .collect();
    Ok(Json(json!({
        "length": entries.len(),
        "entries": entries,
        "nextId": listing.next_id,
    })))
}

pub async fn create(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let page = page_write(&ctx, auth.account_id, body, false).await?;
    let created = ctx.store.create_status_page(auth.account_id, &page).await?;
    Ok((
        StatusCode::CREATED,
        Json(Value::Object(page_json(&created))),
    ))
}

pub async fn get_one(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    match ctx.store.status_page(auth.account_id, id).await? {
        Some(p) => Ok(Json(Value::Object(page_json(&p)))),
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn update(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    let Some(current) = ctx.store.status_page(auth.account_id, id).await? else {
        return Err(ApiError::not_found(NOT_FOUND));
    };
    let private = current.settings.get("isPrivate").and_then(Value::as_bool) == Some(true);
    let page = page_write(&ctx, auth.account_id, body, private).await?;
    match ctx
        .store
        .update_status_page(auth.account_id, id, &page)
        .await?
    {
        Some(p) => Ok(Json(Value::Object(page_json(&p)))),
        None => Err(ApiError::not_found(NOT_FOUND)),
    }
}

pub async fn remove(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id, "statusPageId")?;
    if ctx.store.delete_status_page(auth.account_id, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(NOT_FOUND))
    }
}
