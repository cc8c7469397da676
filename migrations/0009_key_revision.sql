-- A counter that every change to keys, to the locations agent keys name and to
-- accounts bumps, in the transaction of the change (triggers). A running service keeps
-- key lookups in memory and reads this one row every 100 ms to notice changes made by
-- other processes on the same database (`outpost admin`), whatever they are.

CREATE TABLE key_revision (
    id        INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    revision  INTEGER NOT NULL
) STRICT;
INSERT INTO key_revision (id, revision) VALUES (1, 0);

CREATE TRIGGER api_keys_revision_insert AFTER INSERT ON api_keys
BEGIN UPDATE key_revision SET revision = revision + 1 WHERE id = 1; END;
CREATE TRIGGER api_keys_revision_update AFTER UPDATE ON api_keys
BEGIN UPDATE key_revision SET revision = revision + 1 WHERE id = 1; END;
CREATE TRIGGER api_keys_revision_delete AFTER DELETE ON api_keys
BEGIN UPDATE key_revision SET revision = revision + 1 WHERE id = 1; END;

CREATE TRIGGER location_keys_revision_insert AFTER INSERT ON location_keys
BEGIN UPDATE key_revision SET revision = revision + 1 WHERE id = 1; END;
CREATE TRIGGER location_keys_revision_update AFTER UPDATE ON location_keys
BEGIN UPDATE key_revision SET revision = revision + 1 WHERE id = 1; END;
CREATE TRIGGER location_keys_revision_delete AFTER DELETE ON location_keys
BEGIN UPDATE key_revision SET revision = revision + 1 WHERE id = 1; END;

-- An agent key's answer holds its location's id, account and slug name.
CREATE TRIGGER private_locations_revision_update
AFTER UPDATE OF id, account_id, slug_name ON private_locations
BEGIN UPDATE key_revision SET revision = revision + 1 WHERE id = 1; END;
CREATE TRIGGER private_locations_revision_delete AFTER DELETE ON private_locations
BEGIN UPDATE key_revision SET revision = revision + 1 WHERE id = 1; END;

CREATE TRIGGER accounts_revision_update AFTER UPDATE OF id ON accounts
BEGIN UPDATE key_revision SET revision = revision + 1 WHERE id = 1; END;
CREATE TRIGGER accounts_revision_delete AFTER DELETE ON accounts
BEGIN UPDATE key_revision SET revision = revision + 1 WHERE id = 1; END;
