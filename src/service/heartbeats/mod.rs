//! Heartbeat monitors: passive checks that an external job pings at its ping address
//! (`/ping/<token>`, see `service::ping`); a monitor without a ping by its deadline
//! alerts through its alert channels.
//!
//! - `doc`: validation and normalization of heartbeat check documents;
//! - `monitor`: one monitor's timer and its transitions (pure);
//! - `engine`: the task that owns every timer, records pings by group commit and raises
//!   alerts, with its deadline index;
//! - `stats`: success ratios of the events endpoints;
//! - this file: the handle the API and the ping address talk to the engine through,
//!   and the ping tokens.
//!
//! Rules (see `model::heartbeat` for the timer and the event states): a monitor alerts
//! once per failure (a FAILING event at the missed deadline, and a notice to its
//! channels unless muted); the next ping is LATE and sends a recovery notice. Pings of
//! a deactivated monitor are recorded (RECEIVED) but start no timer; deactivation ends
//! a failure without a notice, and a reactivated monitor waits for its first ping. A
//! changed period restarts a running timer at the time of the change; other changes
//! (grace, name, muted) keep it. At start the engine alerts at once for deadlines
//! that passed while the service was down.

pub mod doc;
pub mod engine;
pub mod monitor;
pub mod stats;

use base64::Engine as _;
use rand::RngCore;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::model::HeartbeatState;

/// Commands queued for the engine before pings wait for room.
pub const QUEUE_CAPACITY: usize = 16 * 1024;
/// Random bytes of a ping token (192 bits).
pub const TOKEN_BYTES: usize = 24;
/// Length of a ping token: base64url of [`TOKEN_BYTES`] without padding.
pub const TOKEN_LEN: usize = TOKEN_BYTES * 4 / 3;

/// A new ping token: 192 random bits, URL-safe, separate from the check id.
pub fn new_token() -> String {
    let mut bytes = [0u8; TOKEN_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Whether `s` has the shape of a ping token (anything else is answered 404 at once).
pub fn is_token_shaped(s: &str) -> bool {
    s.len() == TOKEN_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The ping address of a token under the ping base URL (no trailing slash).
pub fn ping_url(ping_base: &str, token: &str) -> String {
    format!("{ping_base}/{token}")
}

/// A ping as the ping address received it.
#[derive(Debug, Clone, PartialEq)]
pub struct PingIn {
    pub token: String,
    /// When it arrived (store milliseconds, from the service's clock).
    pub at: i64,
    pub method: &'static str,
    pub source: Option<String>,
    pub user_agent: Option<String>,
    /// The kept part of the body (lossy UTF-8), if there was one.
    pub body: Option<String>,
    /// From a link-preview bot: answered, not recorded.
    pub ignored: bool,
}

/// What became of a ping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PingOutcome {
    /// Stored (committed) as this event.
    Recorded {
        event_id: Uuid,
        state: HeartbeatState,
    },
    /// A link-preview bot's request for an existing monitor: nothing recorded.
    Ignored,
    /// No monitor has this token.
    NotFound,
    /// The store failed or the engine is gone: nothing recorded, try again.
    Unavailable,
}

/// Commands of the engine.
#[derive(Debug)]
pub enum Command {
    Ping(PingIn, oneshot::Sender<PingOutcome>),
    /// The configuration of a monitor changed (or it was created): read it again.
    Reload(Uuid, oneshot::Sender<()>),
    /// The monitor was deleted.
    Remove(Uuid),
    /// Answers once everything queued before it, and every deadline due at the clock's
    /// time, has been processed.
    Sync(oneshot::Sender<()>),
    /// Process what is queued, then end.
    Stop,
}

/// The handle on the engine; cheap to clone.
#[derive(Clone)]
pub struct Heartbeats {
    tx: mpsc::Sender<Command>,
}

impl Heartbeats {
    /// A handle and the receiving end for [`engine::Engine::load`].
    pub fn channel() -> (Heartbeats, mpsc::Receiver<Command>) {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        (Heartbeats { tx }, rx)
    }

    /// Records a ping; resolves once it is committed (or refused).
    pub async fn ping(&self, ping: PingIn) -> PingOutcome {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Command::Ping(ping, reply)).await.is_err() {
            return PingOutcome::Unavailable;
        }
        answer.await.unwrap_or(PingOutcome::Unavailable)
    }

    /// Tells the engine that a monitor was created or changed; resolves once applied.
    pub async fn reload(&self, check_id: Uuid) {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Command::Reload(check_id, reply)).await.is_ok() {
            let _ = answer.await;
        }
    }

    /// Tells the engine that a monitor is gone.
    pub async fn remove(&self, check_id: Uuid) {
        let _ = self.tx.send(Command::Remove(check_id)).await;
    }

    /// Resolves once the engine processed everything sent before and every deadline due
    /// at the clock's current time (for tests and orderly hand-offs).
    pub async fn sync(&self) {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Command::Sync(reply)).await.is_ok() {
            let _ = answer.await;
        }
    }

    /// Asks the engine to finish what is queued and end.
    pub async fn stop(&self) {
        let _ = self.tx.send(Command::Stop).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_url_safe() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), TOKEN_LEN);
        assert!(is_token_shaped(&a));
        assert!(!is_token_shaped("short"));
        assert!(!is_token_shaped(&format!("{}/", &a[1..])));
        assert!(!is_token_shaped(&"é".repeat(16)));
        assert_eq!(ping_url("http://h/ping", &a), format!("http://h/ping/{a}"));
    }
}
