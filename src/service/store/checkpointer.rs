//! WAL checkpoints beside the writer.
//!
//! SQLite's automatic checkpoint runs on the connection that commits, inside the commit:
//! it copies the WAL back into the database file and syncs both, which on the single
//! writer stalls every write queued behind it (measured: at 20,000 pings/s, 60% of the
//! writer's time went to checkpoints longer than 5 ms). The writer therefore runs with
//! `wal_autocheckpoint=0`, and this task checkpoints on a connection of its own instead:
//! a PASSIVE checkpoint every [`INTERVAL`], which copies what it can without blocking the
//! writer or the readers. Under a write load that never pauses, a PASSIVE checkpoint
//! never reaches the end of the WAL, so the WAL never starts over and would grow without
//! bound: once it holds more than [`RESTART_FRAMES`] frames the task takes the writer
//! (waiting its turn like any writer, and declaring the turn quiet: it changes no row)
//! and runs one RESTART checkpoint on it, which copies the few frames the last PASSIVE
//! one left and makes the next write start the WAL from its beginning.
//! On the writer, not on the task's connection: a RESTART checkpoint holds SQLite's write
//! lock, and a deferred transaction that has read and then wants to write gets
//! SQLITE_BUSY at once, without waiting, when another connection holds that lock (seen
//! as `database is locked` 500s on check triggers). Only the writer connection ever
//! takes the write lock.
//! RESTART rather than TRUNCATE: shrinking and regrowing the file stalled writes for
//! 80-500 ms where reusing it costs nothing.

use std::time::Duration;

use std::sync::Arc;

use sqlx::ConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::StoreError;
use super::conn::Writer;

/// Pause between two checkpoints.
pub const INTERVAL: Duration = Duration::from_millis(250);
/// WAL frames (one page each) beyond which the WAL is made to start over.
pub const RESTART_FRAMES: i64 = 4096;

/// Stops the task; dropping it stops the task too (without waiting).
pub(super) struct Checkpointer {
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    /// Opens the checkpointer's connection and starts the task.
    pub(super) async fn spawn(
        options: &SqliteConnectOptions,
        writer: Arc<Writer>,
    ) -> Result<Checkpointer, StoreError> {
        let conn = options.connect().await?;
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(conn, writer, stop.clone()));
        Ok(Checkpointer {
            stop,
            task: Mutex::new(Some(task)),
        })
    }

    /// Stops the task and waits until its connection is closed.
    pub(super) async fn stop(&self) {
        self.stop.cancel();
        if let Some(task) = self.task.lock().await.take() {
            // A task that panicked has nothing left to close.
            let _ = task.await;
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn run(mut conn: SqliteConnection, writer: Arc<Writer>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(INTERVAL) => {}
        }
        match checkpoint_once(&mut conn, &writer).await {
            Ok(_) => {}
            Err(StoreError::Closed) => break,
            Err(error) => tracing::warn!(error = %error, "WAL checkpoint failed"),
        }
    }
    if let Err(error) = sqlx::Connection::close(conn).await {
        tracing::debug!(error = %error, "closing the checkpointer's connection");
    }
}

/// One round: a PASSIVE checkpoint on `conn`, and a RESTART one on the writer when the
/// WAL has grown past [`RESTART_FRAMES`]. Returns the frames the WAL held.
pub(super) async fn checkpoint_once(
    conn: &mut SqliteConnection,
    writer: &Writer,
) -> Result<i64, StoreError> {
    let frames = checkpoint(conn, "PASSIVE").await?;
    if frames > RESTART_FRAMES {
        let mut turn = writer.acquire().await?;
        turn.quiet();
        checkpoint(&mut turn, "RESTART").await?;
    }
    Ok(frames)
}

/// Runs one checkpoint in `mode`; returns the frames the WAL held.
async fn checkpoint(conn: &mut SqliteConnection, mode: &str) -> Result<i64, sqlx::Error> {
    let (_busy, frames, _copied): (i64, i64, i64) =
        sqlx::query_as(&format!("PRAGMA wal_checkpoint({mode})"))
            .fetch_one(&mut *conn)
            .await?;
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use sqlx::sqlite::SqliteConnection;
    use sqlx::{ConnectOptions, Connection};

    use super::{RESTART_FRAMES, checkpoint, checkpoint_once};
    use crate::service::store::conn::Writer;
    use crate::service::store::conn::tests::probe_options;
    use crate::service::store::generation::Generation;
    use crate::service::store::{PAGE_SIZE, Store};

    #[tokio::test]
    async fn the_store_writer_never_checkpoints_and_new_databases_get_small_pages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).await.expect("open");
        {
            let mut conn = store.write().await.expect("writer");
            let (autocheckpoint,): (i64,) = sqlx::query_as("PRAGMA wal_autocheckpoint")
                .fetch_one(&mut *conn)
                .await
                .expect("pragma");
            assert_eq!(autocheckpoint, 0);
            let (page_size,): (i64,) = sqlx::query_as("PRAGMA page_size")
                .fetch_one(&mut *conn)
                .await
                .expect("pragma");
            assert_eq!(page_size, i64::from(PAGE_SIZE));
        }
        store.close().await;
    }

    /// Writes `rows` rows of one page each in one transaction.
    async fn write_rows(conn: &mut SqliteConnection, rows: i64) {
        let blob = vec![7u8; PAGE_SIZE as usize / 2];
        let mut tx = conn.begin().await.expect("begin");
        for _ in 0..rows {
            sqlx::query("INSERT INTO wal_probe (data) VALUES (?)")
                .bind(&blob)
                .execute(&mut *tx)
                .await
                .expect("insert");
        }
        tx.commit().await.expect("commit");
    }

    #[tokio::test]
    async fn a_wal_grown_past_the_limit_starts_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = probe_options(dir.path()).page_size(PAGE_SIZE);
        let writer = Writer::open(
            &options.clone().pragma("wal_autocheckpoint", "0"),
            Generation::default(),
        )
        .await
        .expect("writer");
        let mut checkpointer = options.connect().await.expect("checkpointer");
        sqlx::query("CREATE TABLE wal_probe (id INTEGER PRIMARY KEY, data BLOB)")
            .execute(&mut *writer.acquire().await.expect("writer"))
            .await
            .expect("create");

        // The writer leaves a long WAL behind; after one round the next write starts
        // it from its beginning.
        write_rows(&mut writer.acquire().await.expect("writer"), RESTART_FRAMES).await;
        let long = checkpoint_once(&mut checkpointer, &writer)
            .await
            .expect("checkpoint");
        assert!(long > RESTART_FRAMES, "WAL held {long} frames");
        write_rows(&mut writer.acquire().await.expect("writer"), 1).await;
        let restarted = checkpoint(&mut checkpointer, "PASSIVE")
            .await
            .expect("checkpoint");
        assert!(
            restarted < 16,
            "WAL held {restarted} frames after a restart"
        );
        writer.close().await;
    }
}
