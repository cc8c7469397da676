//! The store's connections: one writer behind an async mutex and a few read-only
//! connections handed out one caller at a time.
//!
//! Not sqlx's `Pool`: a pool connection given back is pinged (one more round trip to
//! the connection's worker thread, after every statement of every request), and it
//! offers nothing a local file needs (no network to reconnect over, no idle timeouts).
//! Each sqlx SQLite connection runs its statements on a thread of its own, in the order
//! they were sent, so a caller dropped halfway (a cancelled request) leaves its
//! unfinished work, or the rollback of its unfinished transaction, queued ahead of the
//! next caller's statements: the next caller finds the connection as clean as sqlx's
//! ping would have.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex as SyncMutex;

use sqlx::sqlite::{Sqlite, SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection, Transaction};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard, Semaphore, SemaphorePermit};

use super::StoreError;
use super::generation::Generation;

/// The single write connection.
pub(crate) struct Writer {
    conn: Mutex<Option<SqliteConnection>>,
    /// Busy from the moment a caller gets the connection until it gives it back, a new
    /// generation after that (see `generation.rs`).
    generation: Generation,
}

/// The write connection while one caller holds it; giving it back starts a new write
/// generation (unless the holder declared its write quiet).
pub(crate) struct WriteGuard<'a> {
    conn: MappedMutexGuard<'a, SqliteConnection>,
    generation: &'a Generation,
}

impl Writer {
    pub(crate) async fn open(
        options: &SqliteConnectOptions,
        generation: Generation,
    ) -> Result<Writer, StoreError> {
        Ok(Writer {
            conn: Mutex::new(Some(options.connect().await?)),
            generation,
        })
    }

    /// Waits for the connection (callers are served in order).
    pub(crate) async fn acquire(&self) -> Result<WriteGuard<'_>, StoreError> {
        let conn = MutexGuard::try_map(self.conn.lock().await, Option::as_mut)
            .map_err(|_| StoreError::Closed)?;
        self.generation.acquired();
        Ok(WriteGuard {
            conn,
            generation: &self.generation,
        })
    }

    pub(crate) fn generation(&self) -> &Generation {
        &self.generation
    }

    /// Waits for the current holder, then closes the connection; later callers get
    /// [`StoreError::Closed`].
    pub(crate) async fn close(&self) {
        if let Some(conn) = self.conn.lock().await.take()
            && let Err(e) = conn.close().await
        {
            tracing::warn!(error = %e, "closing the write connection");
        }
    }
}

impl WriteGuard<'_> {
    /// Starts a transaction that holds SQLite's write lock from its first statement
    /// (`BEGIN IMMEDIATE`). A deferred transaction that has read and then wants to
    /// write gets SQLITE_BUSY at once, without waiting, when another connection (the
    /// checkpointer's, another process's) holds that lock; an immediate one waits its
    /// turn through the busy timeout.
    pub(crate) async fn begin(&mut self) -> Result<Transaction<'_, Sqlite>, sqlx::Error> {
        Connection::begin_with(&mut *self.conn, "BEGIN IMMEDIATE").await
    }

    /// Declares that this holder writes nothing a cached view reads (plain heartbeat
    /// pings): the write generation stays what it was before (see `generation.rs`).
    pub(crate) fn quiet(&mut self) {
        self.generation.quiet();
    }
}

impl Deref for WriteGuard<'_> {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        &self.conn
    }
}

impl DerefMut for WriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.conn
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.generation.released();
    }
}

/// Read-only connections, one caller each.
pub(crate) struct Readers {
    idle: SyncMutex<Vec<SqliteConnection>>,
    /// One permit per idle connection.
    permits: Semaphore,
}

/// A read connection while one caller holds it.
pub(crate) struct ReadGuard<'a> {
    conn: Option<SqliteConnection>,
    readers: &'a Readers,
    _permit: SemaphorePermit<'a>,
}

impl Readers {
    /// Opens `count` read-only connections.
    pub(crate) async fn open(
        options: &SqliteConnectOptions,
        count: usize,
    ) -> Result<Readers, StoreError> {
        let options = options.clone().read_only(true);
        let mut idle = Vec::with_capacity(count);
        for _ in 0..count {
            idle.push(options.connect().await?);
        }
        Ok(Readers {
            idle: SyncMutex::new(idle),
            permits: Semaphore::new(count),
        })
    }

    /// Waits for an idle connection (callers are served in order).
    pub(crate) async fn acquire(&self) -> Result<ReadGuard<'_>, StoreError> {
        let permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::Closed)?;
        let conn = self
            .idle
            .lock()
            .map_err(|_| StoreError::Closed)?
            .pop()
            .ok_or(StoreError::Closed)?;
        Ok(ReadGuard {
            conn: Some(conn),
            readers: self,
            _permit: permit,
        })
    }

    /// Waits until every connection is idle, closes them all; later callers get
    /// [`StoreError::Closed`].
    pub(crate) async fn close(&self, count: usize) {
        let all = u32::try_from(count).unwrap_or(u32::MAX);
        let Ok(permits) = self.permits.acquire_many(all).await else {
            return;
        };
        self.permits.close();
        permits.forget();
        let idle = match self.idle.lock() {
            Ok(mut idle) => std::mem::take(&mut *idle),
            Err(_) => return,
        };
        for conn in idle {
            if let Err(e) = conn.close().await {
                tracing::warn!(error = %e, "closing a read connection");
            }
        }
    }
}

impl Deref for ReadGuard<'_> {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        // Taken out only by `drop`.
        self.conn.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl DerefMut for ReadGuard<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        self.conn.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        if let (Some(conn), Ok(mut idle)) = (self.conn.take(), self.readers.idle.lock()) {
            idle.push(conn);
        }
        // The permit is given back after the connection (field order).
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;
    use std::time::Duration;

    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
    use sqlx::{ConnectOptions, Connection};

    use super::Writer;
    use crate::service::store::generation::Generation;

    /// A scratch WAL database `probe.db` in `dir`.
    pub(crate) fn probe_options(dir: &Path) -> SqliteConnectOptions {
        SqliteConnectOptions::new()
            .filename(dir.join("probe.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
    }

    #[tokio::test]
    async fn a_write_transaction_holds_the_write_lock_from_its_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = probe_options(dir.path());
        let writer = Writer::open(&options, Generation::default())
            .await
            .expect("writer");
        let mut other = options
            .clone()
            .busy_timeout(Duration::ZERO)
            .connect()
            .await
            .expect("other connection");
        let mut guard = writer.acquire().await.expect("writer");
        sqlx::query("CREATE TABLE probe (id INTEGER PRIMARY KEY)")
            .execute(&mut *guard)
            .await
            .expect("create");

        let mut tx = guard.begin().await.expect("begin");
        let (rows,): (i64,) = sqlx::query_as("SELECT count(*) FROM probe")
            .fetch_one(&mut *tx)
            .await
            .expect("read");
        // Deferred, the transaction would hold a read snapshot only: the other
        // connection would take the write lock here, and the insert below would fail
        // with SQLITE_BUSY at once.
        let taken = other.begin_with("BEGIN IMMEDIATE").await;
        assert!(taken.is_err(), "another connection took the write lock");
        drop(taken);
        sqlx::query("INSERT INTO probe (id) VALUES (?)")
            .bind(rows + 1)
            .execute(&mut *tx)
            .await
            .expect("insert");
        tx.commit().await.expect("commit");
        drop(guard);
        writer.close().await;
    }
}
