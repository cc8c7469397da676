//! Incidents (affecting one or more services) and their incident updates. An update
//! written with `notify_subscribers` queues a notification in the same transaction.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::super::rows;
use super::super::{Store, StoreError, now_ms};
use super::services::{SERVICE_COLUMNS, ensure_owned, service_from_row, split_next};
use super::{
    INCIDENT_UPDATES_SHOWN, IncidentSeverity, IncidentStatus, Listing, MAX_UPDATES_PER_INCIDENT,
    StatusService, enum_col, id_list,
};

/// An incident as written (create, or replacement of its own fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncidentWrite {
    pub name: String,
    pub severity: IncidentSeverity,
    /// Services of the account (at least one), in display order.
    pub service_ids: Vec<Uuid>,
    /// Set explicitly. `None` keeps it; on create the first update's status decides.
    pub last_update_status: Option<IncidentStatus>,
    /// `None` keeps the stored value (null on create); `Some(None)` clears it.
    pub duration: Option<Option<i64>>,
}

/// An incident update as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncidentUpdateWrite {
    pub description: String,
    /// `None`: on create the incident's current status, on replacement the stored one.
    pub status: Option<IncidentStatus>,
    /// When the update is public (store milliseconds).
    pub public_at: i64,
    pub notify_subscribers: bool,
}

/// A stored incident update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncidentUpdate {
    pub id: Uuid,
    pub incident_id: Uuid,
    pub description: String,
    pub status: IncidentStatus,
    pub public_at: DateTime<Utc>,
    pub notify_subscribers: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A stored incident with its services and its latest updates (newest first, at most
/// [`INCIDENT_UPDATES_SHOWN`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incident {
    pub id: Uuid,
    pub account_id: Uuid,
    pub name: String,
    pub severity: IncidentSeverity,
    pub last_update_status: IncidentStatus,
    pub duration: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub services: Vec<StatusService>,
    pub updates: Vec<IncidentUpdate>,
}

const INCIDENT_COLUMNS: &str =
    "id, account_id, name, severity, last_update_status, duration, created_at, updated_at";
const UPDATE_COLUMNS: &str =
    "id, incident_id, description, status, public_at, notify_subscribers, created_at, updated_at";
/// Newest update first.
const UPDATE_ORDER: &str = "public_at DESC, created_at DESC, id DESC";

fn incident_from_row(r: &SqliteRow) -> Result<Incident, StoreError> {
    let severity: String = r.try_get("severity")?;
    let status: String = r.try_get("last_update_status")?;
    Ok(Incident {
        id: rows::uuid(r, "id", "status_incidents")?,
        account_id: rows::uuid(r, "account_id", "status_incidents")?,
        name: r.try_get("name")?,
        severity: enum_col(&severity, IncidentSeverity::parse, "status_incidents")?,
        last_update_status: enum_col(&status, IncidentStatus::parse, "status_incidents")?,
        duration: r.try_get("duration")?,
        created_at: rows::ts(r, "created_at")?,
        updated_at: rows::ts(r, "updated_at")?,
        services: Vec::new(),
        updates: Vec::new(),
    })
}

fn update_from_row(r: &SqliteRow) -> Result<IncidentUpdate, StoreError> {
    let status: String = r.try_get("status")?;
    Ok(IncidentUpdate {
        id: rows::uuid(r, "id", "status_incident_updates")?,
        incident_id: rows::uuid(r, "incident_id", "status_incident_updates")?,
        description: r.try_get("description")?,
        status: enum_col(&status, IncidentStatus::parse, "status_incident_updates")?,
        public_at: rows::ts(r, "public_at")?,
        notify_subscribers: r.try_get("notify_subscribers")?,
        created_at: rows::ts(r, "created_at")?,
        updated_at: rows::ts(r, "updated_at")?,
    })
}

/// Fills services and latest updates of `incidents` (two queries whatever their number).
async fn with_details(
    conn: &mut SqliteConnection,
    mut incidents: Vec<Incident>,
) -> Result<Vec<Incident>, StoreError> {
    if incidents.is_empty() {
        return Ok(incidents);
    }
    let ids = id_list(&incidents.iter().map(|i| i.id).collect::<Vec<_>>());
    let service_rows = sqlx::query(&format!(
        "SELECT x.incident_id, {SERVICE_COLUMNS} FROM status_incident_services x
         JOIN status_services s ON s.id = x.service_id
         WHERE x.incident_id IN (SELECT value FROM json_each(?1))
         ORDER BY x.incident_id, x.position"
    ))
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    let update_rows = sqlx::query(&format!(
        "SELECT {UPDATE_COLUMNS} FROM (
             SELECT *, row_number() OVER (PARTITION BY incident_id ORDER BY {UPDATE_ORDER}) AS n
             FROM status_incident_updates WHERE incident_id IN (SELECT value FROM json_each(?1)))
         WHERE n <= ?2 ORDER BY incident_id, n"
    ))
    .bind(&ids)
    .bind(INCIDENT_UPDATES_SHOWN)
    .fetch_all(&mut *conn)
    .await?;
    let mut services: HashMap<Uuid, Vec<StatusService>> = HashMap::new();
    for r in &service_rows {
        let incident = rows::uuid(r, "incident_id", "status_incident_services")?;
        services
            .entry(incident)
            .or_default()
            .push(service_from_row(r)?);
    }
    let mut updates: HashMap<Uuid, Vec<IncidentUpdate>> = HashMap::new();
    for r in &update_rows {
        let u = update_from_row(r)?;
        updates.entry(u.incident_id).or_default().push(u);
    }
    for i in &mut incidents {
        i.services = services.remove(&i.id).unwrap_or_default();
        i.updates = updates.remove(&i.id).unwrap_or_default();
    }
    Ok(incidents)
}

/// Incidents by id (already known to be the account's), in the order of `ids`.
async fn load_incidents(
    conn: &mut SqliteConnection,
    ids: &[Uuid],
) -> Result<Vec<Incident>, StoreError> {
    let found = sqlx::query(&format!(
        "SELECT {INCIDENT_COLUMNS} FROM status_incidents WHERE id IN (SELECT value FROM json_each(?))"
    ))
    .bind(id_list(ids))
    .fetch_all(&mut *conn)
    .await?;
    let mut by_id: HashMap<Uuid, Incident> = HashMap::new();
    for r in &found {
        let i = incident_from_row(r)?;
        by_id.insert(i.id, i);
    }
    let ordered = ids.iter().filter_map(|id| by_id.remove(id)).collect();
    with_details(conn, ordered).await
}

async fn load_incident(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    id: Uuid,
) -> Result<Option<Incident>, StoreError> {
    if !incident_owned(conn, account_id, id).await? {
        return Ok(None);
    }
    Ok(load_incidents(conn, &[id]).await?.pop())
}

async fn incident_owned(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    id: Uuid,
) -> Result<bool, StoreError> {
    let found = sqlx::query("SELECT 1 FROM status_incidents WHERE account_id = ? AND id = ?")
        .bind(account_id.to_string())
        .bind(id.to_string())
        .fetch_optional(conn)
        .await?;
    Ok(found.is_some())
}

/// Replaces the services of an incident.
async fn write_services(
    conn: &mut SqliteConnection,
    incident_id: Uuid,
    service_ids: &[Uuid],
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM status_incident_services WHERE incident_id = ?")
        .bind(incident_id.to_string())
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "INSERT INTO status_incident_services (incident_id, service_id, position)
         SELECT ?, value, key FROM json_each(?)",
    )
    .bind(incident_id.to_string())
    .bind(id_list(&super::distinct(service_ids)))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Makes the incident's status the status of its latest update (if it has any).
async fn follow_latest_update(
    conn: &mut SqliteConnection,
    incident_id: Uuid,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(&format!(
        "UPDATE status_incidents SET updated_at = ?2, last_update_status = coalesce(
             (SELECT status FROM status_incident_updates WHERE incident_id = ?1
              ORDER BY {UPDATE_ORDER} LIMIT 1), last_update_status)
         WHERE id = ?1"
    ))
    .bind(incident_id.to_string())
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// Queues the notification of an update (once per update).
async fn queue_notification(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    incident_id: Uuid,
    update_id: Uuid,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO status_notifications (id, account_id, incident_id, incident_update_id, created_at)
         VALUES (?, ?, ?, ?, ?) ON CONFLICT (incident_update_id) DO NOTHING",
    )
    .bind(Uuid::new_v4().to_string())
    .bind(account_id.to_string())
    .bind(incident_id.to_string())
    .bind(update_id.to_string())
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// Inserts an update whose status is decided; queues its notification if asked.
async fn insert_update(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    incident_id: Uuid,
    update: &IncidentUpdateWrite,
    status: IncidentStatus,
    now: i64,
) -> Result<Uuid, StoreError> {
    let id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO status_incident_updates (id, incident_id, description, status, public_at,
                                              notify_subscribers, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(id.to_string())
    .bind(incident_id.to_string())
    .bind(&update.description)
    .bind(status.as_str())
    .bind(update.public_at)
    .bind(update.notify_subscribers)
    .bind(now)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    if update.notify_subscribers {
        queue_notification(conn, account_id, incident_id, id, now).await?;
    }
    Ok(id)
}

async fn load_update(
    conn: &mut SqliteConnection,
    account_id: Uuid,
    incident_id: Uuid,
    update_id: Uuid,
) -> Result<Option<IncidentUpdate>, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT {UPDATE_COLUMNS} FROM status_incident_updates
         WHERE id = ?1 AND incident_id = ?2
           AND EXISTS (SELECT 1 FROM status_incidents WHERE id = ?2 AND account_id = ?3)"
    ))
    .bind(update_id.to_string())
    .bind(incident_id.to_string())
    .bind(account_id.to_string())
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(update_from_row).transpose()
}

impl Store {
    /// Creates an incident with its first update.
    pub async fn create_incident(
        &self,
        account_id: Uuid,
        incident: &IncidentWrite,
        first: &IncidentUpdateWrite,
    ) -> Result<Incident, StoreError> {
        let id = Uuid::new_v4();
        let now = now_ms();
        let status = first
            .status
            .or(incident.last_update_status)
            .unwrap_or(IncidentStatus::Investigating);
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        ensure_owned(&mut tx, account_id, &incident.service_ids, "services").await?;
        let done = sqlx::query(
            "INSERT INTO status_incidents (id, account_id, name, severity, last_update_status,
                                           duration, created_at, updated_at)
             SELECT ?, id, ?, ?, ?, ?, ?, ? FROM accounts WHERE id = ?",
        )
        .bind(id.to_string())
        .bind(&incident.name)
        .bind(incident.severity.as_str())
        .bind(status.as_str())
        .bind(incident.duration.flatten())
        .bind(now)
        .bind(now)
        .bind(account_id.to_string())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("account"));
        }
        write_services(&mut tx, id, &incident.service_ids).await?;
        insert_update(&mut tx, account_id, id, first, status, now).await?;
        let created = load_incident(&mut tx, account_id, id).await?;
        tx.commit().await?;
        created.ok_or(StoreError::NotFound("incident"))
    }

    /// Replaces an incident's own fields and services (its updates stay).
    pub async fn update_incident(
        &self,
        account_id: Uuid,
        id: Uuid,
        incident: &IncidentWrite,
    ) -> Result<Option<Incident>, StoreError> {
        let now = now_ms();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        if !incident_owned(&mut tx, account_id, id).await? {
            return Ok(None);
        }
        ensure_owned(&mut tx, account_id, &incident.service_ids, "services").await?;
        sqlx::query(
            "UPDATE status_incidents SET name = ?, severity = ?,
                    last_update_status = coalesce(?, last_update_status),
                    duration = CASE WHEN ? THEN ? ELSE duration END, updated_at = ?
             WHERE id = ?",
        )
        .bind(&incident.name)
        .bind(incident.severity.as_str())
        .bind(incident.last_update_status.map(IncidentStatus::as_str))
        .bind(incident.duration.is_some())
        .bind(incident.duration.flatten())
        .bind(now)
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
        write_services(&mut tx, id, &incident.service_ids).await?;
        let updated = load_incident(&mut tx, account_id, id).await?;
        tx.commit().await?;
        Ok(updated)
    }

    /// One incident of the account.
    pub async fn incident(
        &self,
        account_id: Uuid,
        id: Uuid,
    ) -> Result<Option<Incident>, StoreError> {
        let mut conn = self.read().await?;
        load_incident(&mut conn, account_id, id).await
    }

    /// The account's incidents, newest first, from `next_id` on (that incident
    /// included), at most `limit`. An unknown `next_id` is invalid.
    pub async fn list_incidents(
        &self,
        account_id: Uuid,
        next_id: Option<Uuid>,
        limit: i64,
    ) -> Result<Listing<Incident>, StoreError> {
        let mut conn = self.read().await?;
        let (from_at, from_id) = match next_id {
            None => (i64::MAX, "~".to_owned()),
            Some(id) => {
                let at: Option<i64> = sqlx::query_scalar(
                    "SELECT created_at FROM status_incidents WHERE account_id = ? AND id = ?",
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
                            message: "is not an incident of this account (use the nextId of the previous answer)".into(),
                        });
                    }
                }
            }
        };
        let found = sqlx::query(&format!(
            "SELECT {INCIDENT_COLUMNS} FROM status_incidents
             WHERE account_id = ?1 AND (created_at < ?2 OR (created_at = ?2 AND id <= ?3))
             ORDER BY created_at DESC, id DESC LIMIT ?4"
        ))
        .bind(account_id.to_string())
        .bind(from_at)
        .bind(from_id)
        .bind(limit.saturating_add(1))
        .fetch_all(&mut *conn)
        .await?;
        let mut incidents = found
            .iter()
            .map(incident_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next_id = split_next(&mut incidents, Some(limit), |i| i.id);
        let entries = with_details(&mut conn, incidents).await?;
        Ok(Listing { entries, next_id })
    }

    /// The latest incidents (newest first, at most `per_page` each) that affect a
    /// service shown on each of `page_ids`; pages without incidents are absent.
    pub async fn page_incidents(
        &self,
        page_ids: &[Uuid],
        per_page: i64,
    ) -> Result<HashMap<Uuid, Vec<Incident>>, StoreError> {
        if page_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut conn = self.read().await?;
        let pairs = sqlx::query(
            "SELECT page_id, id FROM (
                 SELECT page_id, id, row_number() OVER
                        (PARTITION BY page_id ORDER BY created_at DESC, id DESC) AS n
                 FROM (SELECT DISTINCT c.page_id, i.id, i.created_at
                       FROM status_page_cards c
                       JOIN status_card_services cs ON cs.card_id = c.id
                       JOIN status_incident_services x ON x.service_id = cs.service_id
                       JOIN status_incidents i ON i.id = x.incident_id
                       JOIN status_pages p ON p.id = c.page_id AND p.account_id = i.account_id
                       WHERE c.page_id IN (SELECT value FROM json_each(?1))))
             WHERE n <= ?2 ORDER BY page_id, n",
        )
        .bind(id_list(page_ids))
        .bind(per_page)
        .fetch_all(&mut *conn)
        .await?;
        let mut wanted: Vec<(Uuid, Uuid)> = Vec::with_capacity(pairs.len());
        for r in &pairs {
            wanted.push((
                rows::uuid(r, "page_id", "status_page_cards")?,
                rows::uuid(r, "id", "status_incidents")?,
            ));
        }
        let ids = super::distinct(&wanted.iter().map(|(_, i)| *i).collect::<Vec<_>>());
        let loaded: HashMap<Uuid, Incident> = load_incidents(&mut conn, &ids)
            .await?
            .into_iter()
            .map(|i| (i.id, i))
            .collect();
        let mut out: HashMap<Uuid, Vec<Incident>> = HashMap::new();
        for (page, id) in wanted {
            if let Some(i) = loaded.get(&id) {
                out.entry(page).or_default().push(i.clone());
            }
        }
        Ok(out)
    }

    /// Deletes an incident with its updates; false if unknown.
    pub async fn delete_incident(&self, account_id: Uuid, id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM status_incidents WHERE account_id = ? AND id = ?")
            .bind(account_id.to_string())
            .bind(id.to_string())
            .execute(&mut *self.write().await?)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The latest updates of an incident, newest first (at most
    /// [`INCIDENT_UPDATES_SHOWN`]); `None` if the account has no such incident.
    pub async fn incident_updates(
        &self,
        account_id: Uuid,
        incident_id: Uuid,
    ) -> Result<Option<Vec<IncidentUpdate>>, StoreError> {
        let mut conn = self.read().await?;
        if !incident_owned(&mut conn, account_id, incident_id).await? {
            return Ok(None);
        }
        let found = sqlx::query(&format!(
            "SELECT {UPDATE_COLUMNS} FROM status_incident_updates WHERE incident_id = ?
             ORDER BY {UPDATE_ORDER} LIMIT ?"
        ))
        .bind(incident_id.to_string())
        .bind(INCIDENT_UPDATES_SHOWN)
        .fetch_all(&mut *conn)
        .await?;
        found
            .iter()
            .map(update_from_row)
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// One update of one of the account's incidents.
    pub async fn incident_update(
        &self,
        account_id: Uuid,
        incident_id: Uuid,
        update_id: Uuid,
    ) -> Result<Option<IncidentUpdate>, StoreError> {
        let mut conn = self.read().await?;
        load_update(&mut conn, account_id, incident_id, update_id).await
    }

    /// Adds an update to an incident (the incident's status follows its latest update);
    /// `None` if the account has no such incident.
    pub async fn create_incident_update(
        &self,
        account_id: Uuid,
        incident_id: Uuid,
        update: &IncidentUpdateWrite,
    ) -> Result<Option<IncidentUpdate>, StoreError> {
        let now = now_ms();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let row = sqlx::query(
            "SELECT last_update_status,
                    (SELECT count(*) FROM status_incident_updates WHERE incident_id = ?1) AS n
             FROM status_incidents WHERE id = ?1 AND account_id = ?2",
        )
        .bind(incident_id.to_string())
        .bind(account_id.to_string())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let current: String = row.try_get("last_update_status")?;
        let count: i64 = row.try_get("n")?;
        if count >= MAX_UPDATES_PER_INCIDENT {
            return Err(StoreError::Conflict {
                field: "incidentUpdates",
                message: format!(
                    "the incident already has {MAX_UPDATES_PER_INCIDENT} updates; delete some first"
                ),
            });
        }
        let status = match update.status {
            Some(s) => s,
            None => enum_col(&current, IncidentStatus::parse, "status_incidents")?,
        };
        let id = insert_update(&mut tx, account_id, incident_id, update, status, now).await?;
        follow_latest_update(&mut tx, incident_id, now).await?;
        let created = load_update(&mut tx, account_id, incident_id, id).await?;
        tx.commit().await?;
        Ok(created)
    }

    /// Replaces an update (an absent status keeps the stored one); asking to notify
    /// subscribers queues a notification unless the update already has one.
    pub async fn update_incident_update(
        &self,
        account_id: Uuid,
        incident_id: Uuid,
        update_id: Uuid,
        update: &IncidentUpdateWrite,
    ) -> Result<Option<IncidentUpdate>, StoreError> {
        let now = now_ms();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        if load_update(&mut tx, account_id, incident_id, update_id)
            .await?
            .is_none()
        {
            return Ok(None);
        }
        sqlx::query(
            "UPDATE status_incident_updates SET description = ?, status = coalesce(?, status),
                    public_at = ?, notify_subscribers = ?, updated_at = ?
             WHERE id = ?",
        )
        .bind(&update.description)
        .bind(update.status.map(IncidentStatus::as_str))
        .bind(update.public_at)
        .bind(update.notify_subscribers)
        .bind(now)
        .bind(update_id.to_string())
        .execute(&mut *tx)
        .await?;
        if update.notify_subscribers {
            queue_notification(&mut tx, account_id, incident_id, update_id, now).await?;
        }
        follow_latest_update(&mut tx, incident_id, now).await?;
        let updated = load_update(&mut tx, account_id, incident_id, update_id).await?;
        tx.commit().await?;
        Ok(updated)
    }

    /// Deletes an update (and its notification if not delivered yet); false if unknown.
    pub async fn delete_incident_update(
        &self,
        account_id: Uuid,
        incident_id: Uuid,
        update_id: Uuid,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut conn = self.write().await?;
        let mut tx = conn.begin().await?;
        let done = sqlx::query(
            "DELETE FROM status_incident_updates WHERE id = ?1 AND incident_id = ?2
               AND EXISTS (SELECT 1 FROM status_incidents WHERE id = ?2 AND account_id = ?3)",
        )
        .bind(update_id.to_string())
        .bind(incident_id.to_string())
        .bind(account_id.to_string())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        follow_latest_update(&mut tx, incident_id, now).await?;
        tx.commit().await?;
        Ok(true)
    }
}
