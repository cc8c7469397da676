-- Outpost control plane, schema version 1.
--
-- Conventions: ids are lowercase hyphenated UUID text; times are integer milliseconds
-- since the Unix epoch (UTC); JSON columns hold JSON text. Secrets (API keys, agent
-- keys) are stored as SHA-256 hashes only.

CREATE TABLE accounts (
    id          TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY NOT NULL,
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    key_hash    BLOB NOT NULL,
    masked      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
) STRICT;
CREATE UNIQUE INDEX api_keys_hash ON api_keys(key_hash);
CREATE INDEX api_keys_account ON api_keys(account_id);

CREATE TABLE private_locations (
    id          TEXT PRIMARY KEY NOT NULL,
    account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    slug_name   TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX private_locations_slug ON private_locations(account_id, slug_name);

-- At most two keys per location are active (revoked_at IS NULL); the store enforces it.
CREATE TABLE location_keys (
    id          TEXT PRIMARY KEY NOT NULL,
    location_id TEXT NOT NULL REFERENCES private_locations(id) ON DELETE CASCADE,
    key_hash    BLOB NOT NULL,
    masked      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
) STRICT;
CREATE UNIQUE INDEX location_keys_hash ON location_keys(key_hash);
CREATE INDEX location_keys_location ON location_keys(location_id);

-- Agents seen by HELLO, for operators.
CREATE TABLE agents (
    id            TEXT PRIMARY KEY NOT NULL,
    location_id   TEXT NOT NULL REFERENCES private_locations(id) ON DELETE CASCADE,
    version       TEXT NOT NULL,
    first_seen_at INTEGER NOT NULL,
    last_seen_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX agents_location ON agents(location_id);

-- A check: the normalized document as the API echoes it, plus the columns queries need.
CREATE TABLE checks (
    id                TEXT PRIMARY KEY NOT NULL,
    account_id        TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    check_type        TEXT NOT NULL,
    name              TEXT NOT NULL,
    activated         INTEGER NOT NULL,
    frequency         INTEGER NOT NULL,
    frequency_offset  INTEGER,
    tags              TEXT NOT NULL,
    private_locations TEXT NOT NULL,
    document          TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;
CREATE INDEX checks_account ON checks(account_id, created_at, id);

-- When the scheduler runs an activated check next. Kept apart from `checks` so that
-- every run rewrites a small row, not the document.
CREATE TABLE check_schedules (
    check_id     TEXT PRIMARY KEY NOT NULL REFERENCES checks(id) ON DELETE CASCADE,
    interval_ms  INTEGER NOT NULL,
    next_run_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX check_schedules_due ON check_schedules(next_run_at);

-- One execution of a check across its run locations. The counters are the FINAL
-- results received so far; the status is derived from them by SessionStatus::aggregate.
CREATE TABLE check_sessions (
    id               TEXT PRIMARY KEY NOT NULL,
    account_id       TEXT NOT NULL,
    check_id         TEXT NOT NULL REFERENCES checks(id) ON DELETE CASCADE,
    check_type       TEXT NOT NULL,
    name             TEXT NOT NULL,
    status           TEXT NOT NULL,
    run_source       TEXT NOT NULL,
    run_locations    TEXT NOT NULL,
    locations_total  INTEGER NOT NULL,
    n_passed         INTEGER NOT NULL DEFAULT 0,
    n_failed         INTEGER NOT NULL DEFAULT 0,
    n_degraded       INTEGER NOT NULL DEFAULT 0,
    n_timed_out      INTEGER NOT NULL DEFAULT 0,
    started_at       INTEGER NOT NULL,
    stopped_at       INTEGER
) STRICT;
CREATE INDEX check_sessions_account ON check_sessions(account_id, id);
CREATE INDEX check_sessions_check ON check_sessions(check_id, started_at);

-- The live queue: one row per session x run location until its FINAL result exists.
-- state 0 = queued, 1 = leased. A finished job's row is deleted; its result row
-- (check_results, unique per job) is the record of it. available_at = when the job
-- (re-)entered the queue: it orders the queue and ages queued jobs out.
CREATE TABLE jobs (
    id               TEXT PRIMARY KEY NOT NULL,
    session_id       TEXT NOT NULL REFERENCES check_sessions(id) ON DELETE CASCADE,
    check_id         TEXT NOT NULL,
    account_id       TEXT NOT NULL,
    location_id      TEXT NOT NULL REFERENCES private_locations(id) ON DELETE CASCADE,
    run_location     TEXT NOT NULL,
    pool             TEXT NOT NULL,
    state            INTEGER NOT NULL DEFAULT 0,
    lease_id         TEXT,
    leased_by        TEXT,
    lease_expires_at INTEGER,
    expiries         INTEGER NOT NULL DEFAULT 0,
    cancelled        INTEGER NOT NULL DEFAULT 0,
    available_at     INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    payload          TEXT NOT NULL
) STRICT;
CREATE INDEX jobs_queue ON jobs(location_id, pool, available_at) WHERE state = 0;
CREATE INDEX jobs_queued_age ON jobs(available_at) WHERE state = 0;
CREATE INDEX jobs_leases ON jobs(lease_expires_at) WHERE state = 1;
CREATE INDEX jobs_session ON jobs(session_id);

CREATE TABLE check_results (
    id                     TEXT PRIMARY KEY NOT NULL,
    account_id             TEXT NOT NULL,
    check_id               TEXT NOT NULL,
    session_id             TEXT NOT NULL REFERENCES check_sessions(id) ON DELETE CASCADE,
    job_id                 TEXT NOT NULL,
    lease_id               TEXT,
    location_id            TEXT NOT NULL,
    run_location           TEXT NOT NULL,
    result_type            TEXT NOT NULL,
    check_type             TEXT NOT NULL,
    name                   TEXT NOT NULL,
    status                 TEXT NOT NULL,
    has_errors             INTEGER NOT NULL,
    has_failures           INTEGER NOT NULL,
    is_degraded            INTEGER NOT NULL,
    aborted                INTEGER NOT NULL,
    is_cancelled           INTEGER NOT NULL,
    over_max_response_time INTEGER,
    response_time          REAL,
    attempts               INTEGER NOT NULL,
    started_at             INTEGER,
    stopped_at             INTEGER,
    created_at             INTEGER NOT NULL,
    result                 TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX check_results_final_job ON check_results(job_id) WHERE result_type = 'FINAL';
CREATE INDEX check_results_check ON check_results(check_id, created_at);
CREATE INDEX check_results_session ON check_results(session_id);

CREATE TABLE artifacts (
    id          TEXT PRIMARY KEY NOT NULL,
    account_id  TEXT NOT NULL,
    session_id  TEXT NOT NULL REFERENCES check_sessions(id) ON DELETE CASCADE,
    job_id      TEXT NOT NULL,
    lease_id    TEXT NOT NULL,
    name        TEXT NOT NULL,
    path        TEXT NOT NULL,
    size        INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX artifacts_job_name ON artifacts(job_id, name);
CREATE INDEX artifacts_session ON artifacts(session_id);
