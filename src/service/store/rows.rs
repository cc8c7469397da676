//! Decoding helpers shared by the store modules: UUID text, millisecond times, JSON columns.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::StoreError;

/// Reads a UUID stored as text.
pub(super) fn uuid(row: &SqliteRow, col: &str, table: &'static str) -> Result<Uuid, StoreError> {
    let s: String = row.try_get(col)?;
    parse_uuid(&s, table)
}

pub(super) fn parse_uuid(s: &str, table: &'static str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(s).map_err(|e| StoreError::Corrupt {
        table,
        message: format!("bad uuid {s:?}: {e}"),
    })
}

/// Converts store milliseconds to a timestamp.
pub(crate) fn time(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::UNIX_EPOCH)
}

/// Reads a millisecond timestamp.
pub(super) fn ts(row: &SqliteRow, col: &str) -> Result<DateTime<Utc>, StoreError> {
    let ms: i64 = row.try_get(col)?;
    Ok(time(ms))
}

/// Reads a nullable millisecond timestamp.
pub(super) fn opt_ts(row: &SqliteRow, col: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
    let ms: Option<i64> = row.try_get(col)?;
    Ok(ms.map(time))
}

/// Reads a JSON text column into `T`.
pub(super) fn json<T: serde::de::DeserializeOwned>(
    row: &SqliteRow,
    col: &str,
    table: &'static str,
) -> Result<T, StoreError> {
    let s: String = row.try_get(col)?;
    serde_json::from_str(&s).map_err(|e| StoreError::Corrupt {
        table,
        message: format!("bad JSON in {col}: {e}"),
    })
}

/// Serialises a value for binding as JSON text. Serialising our own types cannot fail
/// in practice; if it does, the error is reported as a corrupt value.
pub(super) fn to_json<T: serde::Serialize>(
    value: &T,
    table: &'static str,
) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt {
        table,
        message: format!("cannot serialise: {e}"),
    })
}
