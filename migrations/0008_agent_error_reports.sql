-- Outpost control plane, schema version 8 (7 is another branch's): error reports of
-- agents (EXTERNAL_OBSERVABILITY). One row per report an agent sent: an internal error
-- or a panic of the agent, folded with its repeats (`count` between `first_seen_at` and
-- `last_seen_at`), with the agent's version, platform and runtime. Only the newest
-- reports of each private location are kept (store/error_reports.rs trims the rest in
-- the transaction that inserts). `received_at` orders them; rowid breaks ties.

CREATE TABLE agent_error_reports (
    id            TEXT PRIMARY KEY NOT NULL,
    account_id    TEXT NOT NULL,
    location_id   TEXT NOT NULL REFERENCES private_locations(id) ON DELETE CASCADE,
    event         TEXT NOT NULL,
    message       TEXT NOT NULL,
    backtrace     TEXT,
    agent_version TEXT NOT NULL,
    platform      TEXT NOT NULL,
    runtime       TEXT NOT NULL,
    first_seen_at INTEGER NOT NULL,
    last_seen_at  INTEGER NOT NULL,
    count         INTEGER NOT NULL CHECK (count >= 1),
    received_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX agent_error_reports_location ON agent_error_reports(location_id, received_at);
CREATE INDEX agent_error_reports_received ON agent_error_reports(received_at);
