//! Artifacts uploaded by agents (files live under DATA_DIR/artifacts; rows point at them).

use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::rows::{self, time};
use super::{Store, StoreError};

/// Where an upload for (job, lease) belongs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactTarget {
    pub session_id: Uuid,
    pub account_id: Uuid,
}

/// A stored artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRecord {
    pub id: Uuid,
    pub job_id: Uuid,
    pub name: String,
    /// Path relative to the data directory.
    pub path: String,
    pub size: i64,
    pub created_at: DateTime<Utc>,
}

impl Store {
    /// The session an upload for (job, lease) from `location_id` belongs to: the job
    /// must be leased by that lease and unexpired, or already finished by it.
    pub async fn artifact_target(
        &self,
        location_id: Uuid,
        job_id: Uuid,
        lease_id: Uuid,
        now: i64,
    ) -> Result<Option<ArtifactTarget>, StoreError> {
        let row = sqlx::query(
            "SELECT session_id, account_id FROM jobs
              WHERE id = ?1 AND lease_id = ?2 AND location_id = ?3 AND state = 1
                AND lease_expires_at > ?4
             UNION ALL
             SELECT session_id, account_id FROM check_results
              WHERE job_id = ?1 AND result_type = 'FINAL' AND lease_id = ?2
                AND location_id = ?3
             LIMIT 1",
        )
        .bind(job_id.to_string())
        .bind(lease_id.to_string())
        .bind(location_id.to_string())
        .bind(now)
        .fetch_optional(&mut *self.read().await?)
        .await?;
        row.map(|r| {
            Ok(ArtifactTarget {
                session_id: rows::uuid(&r, "session_id", "jobs")?,
                account_id: rows::uuid(&r, "account_id", "jobs")?,
            })
        })
        .transpose()
    }

    /// Records an uploaded file (replacing an earlier upload of the same name for the job).
    #[allow(clippy::too_many_arguments)]
    pub async fn record_artifact(
        &self,
        target: &ArtifactTarget,
        job_id: Uuid,
        lease_id: Uuid,
        name: &str,
        path: &str,
        size: i64,
        now: i64,
    ) -> Result<ArtifactRecord, StoreError> {
        let id = Uuid::new_v4();
        sqlx::query(
            "INSERT INTO artifacts (id, account_id, session_id, job_id, lease_id, name, path,
                                    size, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT(job_id, name) DO UPDATE
                SET id = excluded.id, lease_id = excluded.lease_id, path = excluded.path,
                    size = excluded.size, created_at = excluded.created_at",
        )
        .bind(id.to_string())
        .bind(target.account_id.to_string())
        .bind(target.session_id.to_string())
        .bind(job_id.to_string())
        .bind(lease_id.to_string())
        .bind(name)
        .bind(path)
        .bind(size)
        .bind(now)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(ArtifactRecord {
            id,
            job_id,
            name: name.to_owned(),
            path: path.to_owned(),
            size,
            created_at: time(now),
        })
    }

    /// The artifacts of one result of the account: those uploaded for the result's job
    /// under the result's lease, by name.
    pub async fn result_artifacts(
        &self,
        account_id: Uuid,
        job_id: Uuid,
        lease_id: Uuid,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        let found = sqlx::query(
            "SELECT id, job_id, name, path, size, created_at FROM artifacts
              WHERE job_id = ? AND lease_id = ? AND account_id = ? ORDER BY name",
        )
        .bind(job_id.to_string())
        .bind(lease_id.to_string())
        .bind(account_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(artifact_from_row).collect()
    }

    /// The artifacts of a session.
    pub async fn session_artifacts(
        &self,
        session_id: Uuid,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        let found = sqlx::query(
            "SELECT id, job_id, name, path, size, created_at FROM artifacts
              WHERE session_id = ? ORDER BY created_at, id",
        )
        .bind(session_id.to_string())
        .fetch_all(&mut *self.read().await?)
        .await?;
        found.iter().map(artifact_from_row).collect()
    }
}

fn artifact_from_row(r: &sqlx::sqlite::SqliteRow) -> Result<ArtifactRecord, StoreError> {
    Ok(ArtifactRecord {
        id: rows::uuid(r, "id", "artifacts")?,
        job_id: rows::uuid(r, "job_id", "artifacts")?,
        name: r.try_get("name")?,
        path: r.try_get("path")?,
        size: r.try_get("size")?,
        created_at: rows::ts(r, "created_at")?,
    })
}
