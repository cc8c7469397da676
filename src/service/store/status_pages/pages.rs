//! Status pages and their cards (ordered groups of services).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::super::rows;
use super::super::{Store, StoreError, now_ms};
use super::services::{SERVICE_COLUMNS, ensure_owned, service_from_row, split_next};
use super::{Listing, StatusService, id_list};

/// A card as written: an existing card keeps its id (and creation time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardWrite {
    pub id: Option<Uuid>,
    pub name: String,
    /// Distinct services of the account, in display order.
    pub service_ids: Vec<Uuid>,
}

/// A status page as written (create, or full replacement).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusPageWrite {
    pub name: String,
    /// Lowercase; unique over all accounts.
    pub url: String,
    /// Lowercase host name; unique over all accounts.
    pub custom_domain: Option<String>,
    pub description: Option<String>,
    /// Presentation fields as the API echoes them (themeColors, logo, logoDark, favicon,
    /// redirectTo, defaultTheme, version, isPrivate).
    pub settings: Map<String, Value>,
    pub cards: Vec<CardWrite>,
}

/// A card of a page with its services in display order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCard {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub services: Vec<StatusService>,
}

/// A stored status page with its cards in display order.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusPage {
    pub id: Uuid,
    pub account_id: Uuid,
    pub name: String,
    pub url: String,
    pub custom_domain: Option<String>,
    pub description: Option<String>,
    pub settings: Map<String, Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub cards: Vec<StatusCard>,
}

impl StatusPage {
    /// Every service shown on the page (each once), in display order.
    pub fn service_ids(&self) -> Vec<Uuid> {
        let all: Vec<Uuid> = self
            .cards
            .iter()
            .flat_map(|c| c.services.iter().map(|s| s.id))
            .collect();
        super::distinct(&all)
    }
}

const PAGE_COLUMNS: &str =
    "id, account_id, name, url, custom_domain, description, settings, created_at, updated_at";

fn page_from_row(r: &SqliteRow) -> Result<StatusPage, StoreError> {
    let settings: Value = rows::json(r, "settings", "status_pages")?;
    Ok(StatusPage {
        id: rows::uuid(r, "id", "status_pages")?,
        account_id: rows::uuid(r, "account_id", "status_pages")?,
        name: r.try_get("name")?,
        url: r.try_get("url")?,
        custom_domain: r.try_get("custom_domain")?,
        description: r.try_get("description")?,
        settings: match settings {
            Value::Object(m) => m,
            _ => Map::new(),
        },
        created_at: rows::ts(r, "created_at")?,
        updated_at: rows::ts(r, "updated_at")?,
        cards: Vec::new(),
    })
}

/// Fills the cards of `pages` (two queries whatever their number).
async fn with_cards(
    conn: &mut SqliteConnection,
    mut pages: Vec<StatusPage>,
) -> Result<Vec<StatusPage>, StoreError> {
    if pages.is_empty() {
        return Ok(pages);
    }
    let ids: Vec<Uuid> = pages.iter().map(|p| p.id).collect();
    let card_rows = sqlx::query(
        "SELECT id, page_id, name, created_at, updated_at FROM status_page_cards
         WHERE page_id IN (SELECT value FROM json_each(?)) ORDER BY page_id, position",
    )
    .bind(id_list(&ids))
    .fetch_all(&mut *conn)
    .await?;
    let service_rows = sqlx::query(&format!(
        "SELECT cs.card_id, {SERVICE_COLUMNS} FROM status_card_services cs
         JOIN status_page_cards c ON c.id = cs.card_id
         JOIN status_services s ON s.id = cs.service_id
         WHERE c.page_id IN (SELECT value FROM json_each(?))
         ORDER BY cs.card_id, cs.position"
    ))
    .bind(id_list(&ids))
    .fetch_all(&mut *conn)
    .await?;
    let mut services: HashMap<Uuid, Vec<StatusService>> = HashMap::new();
    for r in &service_rows {
        let card = rows::uuid(r, "card_id", "status_card_services")?;
        services.entry(card).or_default().push(service_from_row(r)?);
    }
    let mut cards: HashMap<Uuid, Vec<StatusCard>> = HashMap::new();
    for r in &card_rows {
        let id = rows::uuid(r, "id", "status_page_cards")?;
        let page = rows::uuid(r, "page_id", "status_page_cards")?;
        cards.entry(page).or_default().push(StatusCard {
            id,
            name: r.try_get("name")?,
            created_at: rows::ts(r, "created_at")?,
            updated_at: rows::ts(r, "updated_at")?,
            services: services.remove(&id).unwrap_or_default(),
        });
    }
    for p in &mut pages {
        p.cards = cards.remove(&p.id).unwrap_or_default();
    }
    Ok(pages)
}

/// Fails if another page (not `own`) has `url` or `domain`.
async fn ensure_free(
    conn: &mut SqliteConnection,
    own: Uuid,
    url: &str,
    domain: Option<&str>,
) -> Result<(), StoreError> {
    let taken = sqlx::query("SELECT 1 FROM status_pages WHERE url = ? AND id != ?")
        .bind(url)
        .bind(own.to_string())
        .fetch_optional(&mut *conn)
        .await?;
    if taken.is_some() {
        return Err(StoreError::Conflict {
            field: "url",
            message: format!("{url:?} is already the url of a status page"),
        });
    }
    if let Some(domain) = domain {
        let taken = sqlx::query("SELECT 1 FROM status_pages WHERE custom_domain = ? AND id != ?")
            .bind(domain)
            .bind(own.to_string())
            .fetch_optional(&mut *conn)
            .await?;
        if taken.is_some() {
            return Err(StoreError::Conflict {
                field: "customDomain",
                message: format!("{domain:?} is already the custom domain of a status page"),
            });
        }
    }
    Ok(())
}

/// Replaces the cards of page `page_id` by `cards`; `kept` maps the ids of the page's
/// existing cards to their creation time.
async fn write_cards(
    conn: &mut SqliteConnection,
    page_id: Uuid,
    cards: &[CardWrite],
    kept: &HashMap<Uuid, i64>,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM status_page_cards WHERE page_id = ?")
        .bind(page_id.to_string())
        .execute(&mut *conn)
        .await?;
    for (position, card) in cards.iter().enumerate() {
        let (id, created_at) = match card.id.and_then(|id| kept.get(&id).map(|at| (id, *at))) {
            Some(existing) => existing,
            None => (Uuid::new_v4(), now),
        };
        sqlx::query(
            "INSERT INTO status_page_cards (id, page_id, position, name, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(id.to_string())
        .bind(page_id.to_string())
        .bind(i64::try_from(position).unwrap_or(i64::MAX))
        .bind(&card.name)
        .bind(created_at)
        .bind(now)
        .execute(&mut *conn)
        .await?;
        sqlx::query(
            "INSERT INTO status_card_services (card_id, service_id, position)
             SELECT ?, value, key FROM json_each(?)",
        )
        .bind(id.to_string())
        .bind(id_list(&super::distinct(&card.service_ids)))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

fn settings_json(settings: &Map<String, Value>) -> Result<String, StoreError> {
    rows::to_json(settings, "status_pages")
}

impl Store {
    /// Creates a status page with its cards.
    pub async fn create_status_page(
        &self,
        account_id: Uuid,
        page: &StatusPageWrite,
    ) -> Result<StatusPage, StoreError> {
        let id = Uuid::new_v4();
        let now = now_ms();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        ensure_free(&mut tx, id, &page.url, page.custom_domain.as_deref()).await?;
        let all: Vec<Uuid> = page
            .cards
            .iter()
            .flat_map(|c| c.service_ids.clone())
            .collect();
        ensure_owned(&mut tx, account_id, &all, "cards").await?;
        let done = sqlx::query(
            "INSERT INTO status_pages (id, account_id, name, url, custom_domain, description,
                                       settings, created_at, updated_at)
             SELECT ?, id, ?, ?, ?, ?, ?, ?, ? FROM accounts WHERE id = ?",
        )
        .bind(id.to_string())
        .bind(&page.name)
        .bind(&page.url)
        .bind(&page.custom_domain)
        .bind(&page.description)
        .bind(settings_json(&page.settings)?)
        .bind(now)
        .bind(now)
        .bind(account_id.to_string())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("account"));
        }
        write_cards(&mut tx, id, &page.cards, &HashMap::new(), now).await?;
        let created = load_page(&mut tx, account_id, id).await?;
        tx.commit().await?;
        created.ok_or(StoreError::NotFound("status page"))
    }

    /// Replaces a status page and its cards; cards named by the id of one of the page's
    /// cards keep that id. `None` if the account has no such page.
    pub async fn update_status_page(
        &self,
        account_id: Uuid,
        id: Uuid,
        page: &StatusPageWrite,
    ) -> Result<Option<StatusPage>, StoreError> {
        let now = now_ms();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let exists = sqlx::query("SELECT 1 FROM status_pages WHERE account_id = ? AND id = ?")
            .bind(account_id.to_string())
            .bind(id.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Ok(None);
        }
        ensure_free(&mut tx, id, &page.url, page.custom_domain.as_deref()).await?;
        let all: Vec<Uuid> = page
            .cards
            .iter()
            .flat_map(|c| c.service_ids.clone())
            .collect();
        ensure_owned(&mut tx, account_id, &all, "cards").await?;
        let existing =
            sqlx::query("SELECT id, created_at FROM status_page_cards WHERE page_id = ?")
                .bind(id.to_string())
                .fetch_all(&mut *tx)
                .await?;
        let mut kept = HashMap::new();
        for r in &existing {
            kept.insert(
                rows::uuid(r, "id", "status_page_cards")?,
                r.try_get::<i64, _>("created_at")?,
            );
        }
        if let Some(unknown) = page
            .cards
            .iter()
            .filter_map(|c| c.id)
            .find(|card| !kept.contains_key(card))
        {
            return Err(StoreError::Invalid {
                field: "cards",
                message: format!("card {unknown} is not a card of this status page"),
            });
        }
        sqlx::query(
            "UPDATE status_pages SET name = ?, url = ?, custom_domain = ?, description = ?,
                    settings = ?, updated_at = ?
             WHERE account_id = ? AND id = ?",
        )
        .bind(&page.name)
        .bind(&page.url)
        .bind(&page.custom_domain)
        .bind(&page.description)
        .bind(settings_json(&page.settings)?)
        .bind(now)
        .bind(account_id.to_string())
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
        write_cards(&mut tx, id, &page.cards, &kept, now).await?;
        let updated = load_page(&mut tx, account_id, id).await?;
        tx.commit().await?;
        Ok(updated)
    }

    /// One status page of the account with its cards.
    pub async fn status_page(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<Option<StatusPage>, StoreError> {
        let mut conn = self.read().await?;
        load_page(&mut conn, account_id, id).await
    }

    /// The page served at `url` (any account), for the public page.
    pub async fn status_page_by_url(&self, url: &str) -> Result<Option<StatusPage>, StoreError> {
        self.status_page_where("url", url).await
    }

    /// The page served on the custom domain `domain` (any account).
    pub async fn status_page_by_domain(
        &self,
        domain: &str,
    ) -> Result<Option<StatusPage>, StoreError> {
        self.status_page_where("custom_domain", domain).await
    }

    async fn status_page_where(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<Option<StatusPage>, StoreError> {
        let mut conn = self.read().await?;
        let row = sqlx::query(&format!(
            "SELECT {PAGE_COLUMNS} FROM status_pages WHERE {column} = ?"
        ))
        .bind(value.to_ascii_lowercase())
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let page = page_from_row(&row)?;
        Ok(with_cards(&mut conn, vec![page]).await?.pop())
    }

    /// The account's status pages, oldest first, from `next_id` on (that page included),
    /// at most `limit`. An unknown `next_id` is invalid.
    pub async fn list_status_pages(
        &self,
        account_id: Uuid,
        next_id: Option<Uuid>,
        limit: i64,
    ) -> Result<Listing<StatusPage>, StoreError> {
        let mut conn = self.read().await?;
        let (from_at, from_id) = match next_id {
            None => (i64::MIN, String::new()),
            Some(id) => {
                let at: Option<i64> = sqlx::query_scalar(
                    "SELECT created_at FROM status_pages WHERE account_id = ? AND id = ?",
                )
                .bind(account_id.to_string())
                .bind(id.to_string())
                .fetch_optional(&mut *conn)
                .await?;
                match at {
                    Some(at) => (at, id.to_string()),
                    None => {
                        return Err(StoreError::Invalid {
                            field: "nextId",
                            message: "is not a status page of this account (use the nextId of the previous answer)".into(),
                        });
                    }
                }
            }
        };
        let found = sqlx::query(&format!(
            "SELECT {PAGE_COLUMNS} FROM status_pages
             WHERE account_id = ?1 AND (created_at > ?2 OR (created_at = ?2 AND id >= ?3))
             ORDER BY created_at, id LIMIT ?4"
        ))
        .bind(account_id.to_string())
        .bind(from_at)
        .bind(from_id)
        .bind(limit.saturating_add(1))
        .fetch_all(&mut *conn)
        .await?;
        let mut pages = found
            .iter()
            .map(page_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next_id = split_next(&mut pages, Some(limit), |p| p.id);
        let entries = with_cards(&mut conn, pages).await?;
        Ok(Listing { entries, next_id })
    }

    /// Deletes a status page with its cards and subscriptions; false if unknown.
    pub async fn delete_status_page(&self, account_id: Uuid, id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM status_pages WHERE account_id = ? AND id = ?")
            .bind(account_id.to_string())
            .bind(id.to_string())
            .execute(&mut *self.write().await?)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}

async fn load_page(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    id: Uuid,
) -> Result<Option<StatusPage>, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT {PAGE_COLUMNS} FROM status_pages WHERE account_id = ? AND id = ?"
    ))
    .bind(account_id.to_string())
    .bind(id.to_string())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let page = page_from_row(&row)?;
    Ok(with_cards(conn, vec![page]).await?.pop())
}

/// Whether page `page_id` belongs to the account.
pub(super) async fn page_owned(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    page_id: Uuid,
) -> Result<bool, StoreError> {
    let found = sqlx::query("SELECT 1 FROM status_pages WHERE account_id = ? AND id = ?")
        .bind(account_id.to_string())
        .bind(page_id.to_string())
        .fetch_optional(conn)
        .await?;
    Ok(found.is_some())
}
