//! Projects of monitoring as code: which physical object each declared resource of a
//! project became, and the recorded deployments with their diffs.

use sqlx::Row;
use uuid::Uuid;

use super::rows;
use super::{Store, StoreError};

/// One deployed resource of a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRecord {
    /// `check`, `alert-channel`, `alert-channel-subscription`.
    pub resource_type: String,
    pub logical_id: String,
    /// A check id, an alert channel id, or `<channel id>:<check id>`.
    pub physical_id: String,
}

/// A recorded deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRecord {
    pub id: Uuid,
    pub project: String,
    /// SUCCEEDED or FAILED.
    pub status: String,
    /// The diff (`[{type, logicalId, physicalId, action}]`).
    pub diff: serde_json::Value,
    /// Why it failed.
    pub message: Option<String>,
}

impl Store {
    /// The deployed resources of a project of the account.
    pub async fn project_resources(
        &self,
        account_id: Uuid,
        project: &str,
    ) -> Result<Vec<ResourceRecord>, StoreError> {
        let found = sqlx::query(
            "SELECT resource_type, logical_id, physical_id FROM project_resources
             WHERE account_id = ? AND project = ? ORDER BY resource_type, logical_id",
        )
        .bind(account_id.to_string())
        .bind(project)
        .fetch_all(&mut *self.read().await?)
        .await?;
        found
            .iter()
            .map(|r| {
                Ok(ResourceRecord {
                    resource_type: r.try_get("resource_type")?,
                    logical_id: r.try_get("logical_id")?,
                    physical_id: r.try_get("physical_id")?,
                })
            })
            .collect()
    }

    /// Records (or replaces) the physical object of a resource.
    pub async fn put_project_resource(
        &self,
        account_id: Uuid,
        project: &str,
        r: &ResourceRecord,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO project_resources (account_id, project, resource_type, logical_id, physical_id)
             VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (account_id, project, resource_type, logical_id)
             DO UPDATE SET physical_id = excluded.physical_id",
        )
        .bind(account_id.to_string())
        .bind(project)
        .bind(&r.resource_type)
        .bind(&r.logical_id)
        .bind(&r.physical_id)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// Forgets a resource of a project.
    pub async fn delete_project_resource(
        &self,
        account_id: Uuid,
        project: &str,
        resource_type: &str,
        logical_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "DELETE FROM project_resources
             WHERE account_id = ? AND project = ? AND resource_type = ? AND logical_id = ?",
        )
        .bind(account_id.to_string())
        .bind(project)
        .bind(resource_type)
        .bind(logical_id)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// Records a deployment.
    pub async fn insert_deployment(
        &self,
        account_id: Uuid,
        d: &DeploymentRecord,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO deployments (id, account_id, project, status, diff, message, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(d.id.to_string())
        .bind(account_id.to_string())
        .bind(&d.project)
        .bind(&d.status)
        .bind(rows::to_json(&d.diff, "deployments")?)
        .bind(&d.message)
        .bind(now)
        .execute(&mut *self.write().await?)
        .await?;
        Ok(())
    }

    /// A deployment of a project of the account.
    pub async fn get_deployment(
        &self,
        account_id: Uuid,
        project: &str,
        id: Uuid,
    ) -> Result<Option<DeploymentRecord>, StoreError> {
        let found = sqlx::query(
            "SELECT id, project, status, diff, message FROM deployments
             WHERE id = ? AND account_id = ? AND project = ?",
        )
        .bind(id.to_string())
        .bind(account_id.to_string())
        .bind(project)
        .fetch_optional(&mut *self.read().await?)
        .await?;
        let Some(r) = found else {
            return Ok(None);
        };
        Ok(Some(DeploymentRecord {
            id: rows::uuid(&r, "id", "deployments")?,
            project: r.try_get("project")?,
            status: r.try_get("status")?,
            diff: rows::json(&r, "diff", "deployments")?,
            message: r.try_get("message")?,
        }))
    }
}
