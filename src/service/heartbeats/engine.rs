//! The heartbeat engine: one task that owns every monitor's timer. It records pings
//! (group commit: every ping that arrived while the previous transaction committed goes
//! into the next one, and is answered only after that commit), raises the alert of a
//! monitor whose deadline passed (a FAILING event and a notice in the outbox, in the
//! same transaction), and applies configuration changes. Deadlines sit in an in-memory
//! index ordered by time, rebuilt from the store at start.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::monitor::Monitor;
use super::{Command, PingIn, PingOutcome};
use crate::model::{CheckType, HeartbeatState};
use crate::service::alerts::{AlertNotice, Alerts, NoticeKind};
use crate::service::clock::Clock;
use crate::service::store::{NewEvent, NoticeWrite, Store, StoreError, to_time};

/// Most commands taken from the queue for one batch.
pub const MAX_BATCH: usize = 1024;
/// Pause after a failed commit before the engine tries again.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// The engine's state; [`Engine::run`] consumes it.
pub struct Engine {
    store: Store,
    clock: Arc<dyn Clock>,
    alerts: Alerts,
    rx: mpsc::Receiver<Command>,
    monitors: HashMap<Uuid, Monitor>,
    by_token: HashMap<String, Uuid>,
    /// (deadline, monitor) of every monitor that can alert.
    deadlines: BTreeSet<(i64, Uuid)>,
    /// The deadline each monitor is indexed under.
    indexed: HashMap<Uuid, i64>,
}

/// Why the loop woke up.
#[derive(Debug, PartialEq, Eq)]
enum Woke {
    Commands(usize),
    Timer,
}

/// The work of one batch, committed together.
#[derive(Default)]
struct Batch {
    /// Monitors changed by the batch (copies; applied after the commit).
    staged: HashMap<Uuid, Monitor>,
    events: Vec<NewEvent>,
    notices: Vec<AlertNotice>,
    replies: Vec<(oneshot::Sender<PingOutcome>, PingOutcome)>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.staged.is_empty() && self.events.is_empty() && self.replies.is_empty()
    }
}

/// A time-ordered event id (UUIDv7): inserts append to the table's key.
fn event_id(at: i64) -> Uuid {
    let mut random = [0u8; 10];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut random);
    uuid::Builder::from_unix_timestamp_millis(u64::try_from(at).unwrap_or(0), &random).into_uuid()
}

impl Engine {
    /// Loads every monitor from the store at the clock's time. Timers that must change
    /// (deactivated monitors, periods changed while the engine was not running) are
    /// fixed and stored.
    pub async fn load(
        store: Store,
        clock: Arc<dyn Clock>,
        alerts: Alerts,
        rx: mpsc::Receiver<Command>,
    ) -> Result<Engine, StoreError> {
        let now = clock.now_ms();
        let mut engine = Engine {
            store,
            clock,
            alerts,
            rx,
            monitors: HashMap::new(),
            by_token: HashMap::new(),
            deadlines: BTreeSet::new(),
            indexed: HashMap::new(),
        };
        let mut fixes = Vec::new();
        for row in engine.store.heartbeat_rows().await? {
            let (monitor, changed) = Monitor::from_row(&row, now);
            if changed {
                fixes.push(monitor.timer_write());
            }
            engine.insert(monitor);
        }
        if !fixes.is_empty() {
            engine.store.commit_heartbeats(&[], &fixes, &[]).await?;
        }
        tracing::debug!(
            monitors = engine.monitors.len(),
            armed = engine.deadlines.len(),
            "heartbeat engine loaded"
        );
        Ok(engine)
    }

    fn insert(&mut self, monitor: Monitor) {
        let id = monitor.check_id;
        self.by_token.insert(monitor.token.clone(), id);
        self.monitors.insert(id, monitor);
        self.reindex(id);
    }

    fn remove(&mut self, id: Uuid) {
        if let Some(m) = self.monitors.remove(&id) {
            self.by_token.remove(&m.token);
        }
        if let Some(d) = self.indexed.remove(&id) {
            self.deadlines.remove(&(d, id));
        }
    }

    /// Puts a monitor under its current deadline in the index.
    fn reindex(&mut self, id: Uuid) {
        if let Some(old) = self.indexed.remove(&id) {
            self.deadlines.remove(&(old, id));
        }
        if let Some(d) = self.monitors.get(&id).and_then(Monitor::deadline) {
            self.deadlines.insert((d, id));
            self.indexed.insert(id, d);
        }
    }

    /// Runs the engine ([`Engine::run`]) on a thread of its own, with a single-threaded
    /// runtime: the serial path of every ping (batch, commit, answers) never waits in the
    /// queues of the HTTP server's worker threads behind connection tasks. The returned
    /// task ends when the engine does.
    pub fn spawn_on_own_thread(self) -> std::io::Result<tokio::task::JoinHandle<()>> {
        let (done, ended) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("heartbeat-engine".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime.block_on(self.run()),
                    Err(e) => tracing::error!(error = %e, "cannot start the heartbeat engine"),
                }
                let _ = done.send(());
            })?;
        Ok(tokio::spawn(async move {
            let _ = ended.await;
        }))
    }

    /// Runs until a `Stop` command (or until every sender is gone).
    pub async fn run(mut self) {
        let mut commands = Vec::with_capacity(MAX_BATCH);
        loop {
            // A monitor alerts once the clock is past its deadline.
            let wake_at = self.deadlines.first().map(|(d, _)| d.saturating_add(1));
            let clock = self.clock.clone();
            let woke = tokio::select! {
                biased;
                n = self.rx.recv_many(&mut commands, MAX_BATCH) => Woke::Commands(n),
                _ = async {
                    match wake_at {
                        Some(at) => clock.sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => Woke::Timer,
            };
            if woke == Woke::Commands(0) {
                // Every sender is gone: nothing can reach the engine any more.
                return;
            }
            let stop = self.process(std::mem::take(&mut commands)).await;
            if stop {
                // Whatever was queued behind the stop is still answered.
                while let Ok(cmd) = self.rx.try_recv() {
                    commands.push(cmd);
                }
                if !commands.is_empty() {
                    self.process(std::mem::take(&mut commands)).await;
                }
                return;
            }
        }
    }

    /// Processes commands in order (pings of a run between other commands go into one
    /// commit), then the deadlines due at the clock's time. Returns whether a `Stop`
    /// came.
    async fn process(&mut self, commands: Vec<Command>) -> bool {
        let mut batch = Batch::default();
        let mut syncs = Vec::new();
        let mut stop = false;
        for cmd in commands {
            match cmd {
                Command::Ping(ping, reply) => self.stage_ping(&mut batch, ping, reply),
                Command::Reload(id, reply) => {
                    self.flush(std::mem::take(&mut batch), false).await;
                    self.reload(id).await;
                    let _ = reply.send(());
                }
                Command::Remove(id) => {
                    self.flush(std::mem::take(&mut batch), false).await;
                    self.remove(id);
                }
                Command::Sync(reply) => syncs.push(reply),
                Command::Stop => stop = true,
            }
        }
        self.flush(batch, true).await;
        for reply in syncs {
            let _ = reply.send(());
        }
        stop
    }

    /// The staged copy of a monitor (made on first touch).
    fn staged<'a>(&self, batch: &'a mut Batch, id: Uuid) -> Option<&'a mut Monitor> {
        match batch.staged.entry(id) {
            std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
            std::collections::hash_map::Entry::Vacant(e) => {
                Some(e.insert(self.monitors.get(&id)?.clone()))
            }
        }
    }

    fn stage_ping(&self, batch: &mut Batch, ping: PingIn, reply: oneshot::Sender<PingOutcome>) {
        let Some(&id) = self.by_token.get(&ping.token) else {
            batch.replies.push((reply, PingOutcome::NotFound));
            return;
        };
        if ping.ignored {
            batch.replies.push((reply, PingOutcome::Ignored));
            return;
        }
        let Some(m) = self.staged(batch, id) else {
            batch.replies.push((reply, PingOutcome::NotFound));
            return;
        };
        let fx = m.on_ping(ping.at);
        // A copy only when a notice or a FAILING event needs the monitor.
        let snapshot = (fx.failed_at.is_some() || fx.recovered).then(|| m.clone());
        if let (Some(deadline), Some(m)) = (fx.failed_at, &snapshot) {
            failure(batch, m, deadline);
        }
        let event = NewEvent {
            id: event_id(ping.at),
            check_id: id,
            state: fx.state,
            ts: ping.at,
            method: Some(ping.method.to_owned()),
            source: ping.source,
            user_agent: ping.user_agent,
            body: ping.body,
        };
        if let Some(m) = snapshot.as_ref().filter(|m| fx.recovered && !m.muted) {
            batch.notices.push(notice(
                m,
                NoticeKind::AlertRecovery,
                event.id,
                fx.state,
                ping.at,
                None,
            ));
        }
        batch.replies.push((
            reply,
            PingOutcome::Recorded {
                event_id: event.id,
                state: fx.state,
            },
        ));
        batch.events.push(event);
    }

    /// Raises the alerts of the deadlines passed at `now`.
    fn stage_due(&self, batch: &mut Batch, now: i64) {
        let due: Vec<Uuid> = self
            .deadlines
            .range(..(now, Uuid::nil()))
            .map(|(_, id)| *id)
            .collect();
        for id in due {
            let Some(m) = self.staged(batch, id) else {
                continue;
            };
            if let Some(deadline) = m.on_time(now) {
                let m = m.clone();
                failure(batch, &m, deadline);
            }
        }
    }

    /// Commits a batch (with the due deadlines when `with_due`), then applies it:
    /// monitors, index, ping answers, notices. On failure nothing is applied and the
    /// pings are answered "unavailable".
    async fn flush(&mut self, mut batch: Batch, with_due: bool) {
        if with_due {
            self.stage_due(&mut batch, self.clock.now_ms());
        }
        if batch.is_empty() {
            return;
        }
        // A ping that only moves a running timer (or none) to itself needs no timer
        // write: the store completes the columns from the newest ping event at start.
        let timers: Vec<_> = batch
            .staged
            .values()
            .filter(|m| {
                self.monitors
                    .get(&m.check_id)
                    .is_none_or(|before| !m.timer_follows_pings_since(before))
            })
            .map(Monitor::timer_write)
            .collect();
        let writes: Vec<NoticeWrite> = batch
            .notices
            .iter()
            .map(|n| NoticeWrite {
                account_id: n.account_id,
                check_id: n.check_id,
                notice: n.to_value(),
            })
            .collect();
        let committed = if batch.events.is_empty() && timers.is_empty() && writes.is_empty() {
            Ok(Vec::new())
        } else {
            self.store
                .commit_heartbeats(&batch.events, &timers, &writes)
                .await
        };
        match committed {
            Ok(outbox_ids) => {
                for (id, monitor) in batch.staged {
                    if let Some(slot) = self.monitors.get_mut(&id) {
                        *slot = monitor;
                        self.reindex(id);
                    }
                }
                for (reply, outcome) in batch.replies {
                    let _ = reply.send(outcome);
                }
                for (notice, outbox_id) in batch.notices.into_iter().zip(outbox_ids) {
                    self.alerts.enqueue(Some(outbox_id), notice);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, pings = batch.replies.len(), "cannot store heartbeat events");
                for (reply, outcome) in batch.replies {
                    let outcome = match outcome {
                        PingOutcome::Recorded { .. } => PingOutcome::Unavailable,
                        other => other,
                    };
                    let _ = reply.send(outcome);
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }

    /// Applies the stored configuration of a monitor (after the API changed it).
    async fn reload(&mut self, id: Uuid) {
        let row = match self.store.heartbeat_row(id).await {
            Ok(row) => row,
            Err(e) => {
                tracing::error!(check = %id, error = %e, "cannot reload a heartbeat monitor");
                return;
            }
        };
        let Some(row) = row else {
            self.remove(id);
            return;
        };
        let now = self.clock.now_ms();
        let write = match self.monitors.get_mut(&id) {
            Some(m) => {
                let old_token = m.token.clone();
                let changed = m.reconfigure(&row, now);
                if old_token != m.token {
                    self.by_token.remove(&old_token);
                    self.by_token.insert(m.token.clone(), id);
                }
                changed.then(|| m.timer_write())
            }
            None => {
                let (m, changed) = Monitor::from_row(&row, now);
                let write = changed.then(|| m.timer_write());
                self.insert(m);
                write
            }
        };
        self.reindex(id);
        if let Some(w) = write
            && let Err(e) = self.store.commit_heartbeats(&[], &[w], &[]).await
        {
            tracing::error!(check = %id, error = %e, "cannot store a restarted heartbeat timer");
        }
    }
}

/// Stages the FAILING event (and the notice, unless muted) of a missed deadline.
fn failure(batch: &mut Batch, m: &Monitor, deadline: i64) {
    let id = event_id(deadline);
    batch.events.push(NewEvent {
        id,
        check_id: m.check_id,
        state: HeartbeatState::Failing,
        ts: deadline,
        method: None,
        source: None,
        user_agent: None,
        body: None,
    });
    if !m.muted {
        batch.notices.push(notice(
            m,
            NoticeKind::AlertFailure,
            id,
            HeartbeatState::Failing,
            deadline,
            Some(deadline),
        ));
    }
}

fn notice(
    m: &Monitor,
    kind: NoticeKind,
    event_id: Uuid,
    state: HeartbeatState,
    at: i64,
    deadline: Option<i64>,
) -> AlertNotice {
    let title = match kind {
        NoticeKind::AlertFailure => format!(
            "Heartbeat {:?} is failing: no ping by {}",
            m.name,
            to_time(deadline.unwrap_or(at)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        ),
        NoticeKind::AlertRecovery => format!("Heartbeat {:?} recovered: ping received", m.name),
    };
    AlertNotice {
        alert_type: kind,
        alert_title: title,
        account_id: m.account_id,
        check_id: m.check_id,
        check_name: m.name.clone(),
        check_type: CheckType::Heartbeat,
        tags: m.tags.clone(),
        event_id,
        event_state: state,
        event_at: to_time(at),
        last_ping_at: m.last_ping_at.map(to_time),
        deadline_at: deadline.map(to_time),
    }
}
