-- Outpost control plane, schema version 2: heartbeat monitors, their events, alert
-- channels with their subscriptions, and the outbox of alert notices.
--
-- Conventions as in 0001: ids are UUID text (alert channels and subscriptions have
-- integer ids, as in the reference API); times are integer milliseconds since the Unix
-- epoch (UTC); JSON columns hold JSON text.

-- One row per HEARTBEAT check. The API writes the configuration (token, period, grace);
-- the heartbeat engine alone writes the timer columns. `timer_period_ms` is the period
-- the running timer was started with: when it differs from `period_ms` (a change the
-- engine has not applied, e.g. across a crash) the timer restarts.
CREATE TABLE heartbeats (
    check_id         TEXT PRIMARY KEY NOT NULL REFERENCES checks(id) ON DELETE CASCADE,
    account_id       TEXT NOT NULL,
    token            TEXT NOT NULL,
    period_ms        INTEGER NOT NULL,
    grace_ms         INTEGER NOT NULL,
    timer_started_at INTEGER,
    timer_period_ms  INTEGER,
    failing          INTEGER NOT NULL DEFAULT 0,
    last_ping_at     INTEGER
) STRICT;
CREATE UNIQUE INDEX heartbeats_token ON heartbeats(token);

-- Pings (EARLY, RECEIVED, GRACE, LATE) and missed deadlines (FAILING). Ids are UUIDv7
-- (time-ordered) so that inserts append to the primary key's b-tree.
CREATE TABLE heartbeat_events (
    id          TEXT PRIMARY KEY NOT NULL,
    check_id    TEXT NOT NULL REFERENCES checks(id) ON DELETE CASCADE,
    state       TEXT NOT NULL,
    ts          INTEGER NOT NULL,
    method      TEXT,
    source      TEXT,
    user_agent  TEXT,
    body        TEXT
) STRICT;
CREATE INDEX heartbeat_events_check ON heartbeat_events(check_id, ts, state);

CREATE TABLE alert_channels (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id           TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    type                 TEXT NOT NULL,
    config               TEXT NOT NULL,
    send_recovery        INTEGER NOT NULL,
    send_failure         INTEGER NOT NULL,
    send_degraded        INTEGER NOT NULL,
    ssl_expiry           INTEGER NOT NULL,
    ssl_expiry_threshold INTEGER NOT NULL,
    auto_subscribe       INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER
) STRICT;
CREATE INDEX alert_channels_account ON alert_channels(account_id, id);

-- Which checks a channel alerts for. group_id is kept as given (Outpost has no check
-- groups yet); a row with a check_id goes with its check.
CREATE TABLE alert_subscriptions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id  TEXT NOT NULL,
    channel_id  INTEGER NOT NULL REFERENCES alert_channels(id) ON DELETE CASCADE,
    check_id    TEXT REFERENCES checks(id) ON DELETE CASCADE,
    group_id    INTEGER,
    activated   INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX alert_subscriptions_channel_check ON alert_subscriptions(channel_id, check_id);
CREATE INDEX alert_subscriptions_check ON alert_subscriptions(check_id);

-- Alert notices written in the same transaction as the event that raised them and
-- removed once every channel was tried: a notice survives a crash and is sent after
-- the restart.
CREATE TABLE alert_outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id  TEXT NOT NULL,
    check_id    TEXT NOT NULL,
    notice      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
