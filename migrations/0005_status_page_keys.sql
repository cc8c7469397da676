-- Outpost control plane, schema version 5: keys of private status pages. Only the
-- SHA-256 of a key is stored, with a masked form for display; deleting a key (or its
-- page) locks out every visitor who held it.

CREATE TABLE status_page_keys (
    id         TEXT PRIMARY KEY NOT NULL,
    page_id    TEXT NOT NULL REFERENCES status_pages(id) ON DELETE CASCADE,
    key_hash   BLOB NOT NULL,
    masked     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX status_page_keys_page ON status_page_keys(page_id, created_at, id);
CREATE UNIQUE INDEX status_page_keys_hash ON status_page_keys(key_hash);
