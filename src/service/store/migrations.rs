//! Embedded migrations (the SQL files of `migrations/` at the crate root), applied at
//! start. Built at runtime from `include_str!` so that no compile-time macro is needed.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::SqliteConnection;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// Every migration, in order: (version, description, SQL).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("../../../migrations/0001_init.sql")),
    (
        2,
        "heartbeats",
        include_str!("../../../migrations/0002_heartbeats.sql"),
    ),
    (
        3,
        "projects",
        include_str!("../../../migrations/0003_projects.sql"),
    ),
    (
        4,
        "status pages",
        include_str!("../../../migrations/0004_status_pages.sql"),
    ),
    (
        5,
        "status page keys",
        include_str!("../../../migrations/0005_status_page_keys.sql"),
    ),
    (
        6,
        "status notification deliveries",
        include_str!("../../../migrations/0006_status_deliveries.sql"),
    ),
    (
        7,
        "status subscriber links",
        include_str!("../../../migrations/0007_subscriber_links.sql"),
    ),
    (
        8,
        "agent error reports",
        include_str!("../../../migrations/0008_agent_error_reports.sql"),
    ),
    (
        9,
        "key revision",
        include_str!("../../../migrations/0009_key_revision.sql"),
    ),
    (
        10,
        "location proxy",
        include_str!("../../../migrations/0010_location_proxy.sql"),
    ),
];

/// The compiled-in migrations as a sqlx migration source.
#[derive(Debug)]
struct Embedded;

type BoxDynError = Box<dyn std::error::Error + Send + Sync>;

impl MigrationSource<'static> for Embedded {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send + 'static>> {
        Box::pin(async move {
            Ok(MIGRATIONS
                .iter()
                .map(|(version, description, sql)| {
                    Migration::new(
                        *version,
                        Cow::Borrowed(*description),
                        MigrationType::Simple,
                        Cow::Borrowed(*sql),
                        false,
                    )
                })
                .collect())
        })
    }
}

/// Applies the migrations not yet applied.
pub(super) async fn run(conn: &mut SqliteConnection) -> Result<(), sqlx::migrate::MigrateError> {
    let migrator = Migrator::new(Embedded).await?;
    migrator.run(conn).await
}
