-- Outpost control plane, schema version 3: monitoring as code. A project (named by its
-- logical id, per account) declares resources; each deployed resource maps to the
-- physical object it created (a check id, an alert channel id, a subscription).
--
-- Conventions as in 0001: times are integer milliseconds since the Unix epoch (UTC);
-- JSON columns hold JSON text.

CREATE TABLE project_resources (
    account_id    TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    project       TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    logical_id    TEXT NOT NULL,
    physical_id   TEXT NOT NULL,
    PRIMARY KEY (account_id, project, resource_type, logical_id)
) STRICT;

-- One row per deployment (not dry runs): its outcome and its diff, replayed by the
-- deployment's event stream.
CREATE TABLE deployments (
    id         TEXT PRIMARY KEY NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    project    TEXT NOT NULL,
    status     TEXT NOT NULL,
    diff       TEXT NOT NULL,
    message    TEXT,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX deployments_project ON deployments(account_id, project);
