-- Outpost control plane, schema version 4: status pages. A page shows cards; a card
-- groups services; incidents affect services and carry incident updates; people
-- subscribe to a page; incident updates sent with notifySubscribers wait in
-- status_notifications until delivered.
--
-- Conventions as in 0001: ids are UUID text; times are integer milliseconds since the
-- Unix epoch (UTC); JSON columns hold JSON text. Every object belongs to one account;
-- links only ever join objects of the same account (the store checks it on write).

CREATE TABLE status_services (
    id         TEXT PRIMARY KEY NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX status_services_account ON status_services(account_id, created_at, id);

-- `url` is the page's name in the public namespace (unique over all accounts, as is a
-- custom domain). `settings` holds the presentation fields as the API echoes them
-- (themeColors, logo, logoDark, favicon, redirectTo, defaultTheme, version, isPrivate).
CREATE TABLE status_pages (
    id            TEXT PRIMARY KEY NOT NULL,
    account_id    TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    url           TEXT NOT NULL,
    custom_domain TEXT,
    description   TEXT,
    settings      TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX status_pages_account ON status_pages(account_id, created_at, id);
CREATE UNIQUE INDEX status_pages_url ON status_pages(url);
CREATE UNIQUE INDEX status_pages_domain ON status_pages(custom_domain)
    WHERE custom_domain IS NOT NULL;

CREATE TABLE status_page_cards (
    id         TEXT PRIMARY KEY NOT NULL,
    page_id    TEXT NOT NULL REFERENCES status_pages(id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX status_page_cards_page ON status_page_cards(page_id, position);

-- A deleted service leaves the cards that showed it.
CREATE TABLE status_card_services (
    card_id    TEXT NOT NULL REFERENCES status_page_cards(id) ON DELETE CASCADE,
    service_id TEXT NOT NULL REFERENCES status_services(id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    PRIMARY KEY (card_id, service_id)
) STRICT;
CREATE INDEX status_card_services_service ON status_card_services(service_id);

-- `last_update_status` follows the latest incident update (or an explicit PUT).
CREATE TABLE status_incidents (
    id                 TEXT PRIMARY KEY NOT NULL,
    account_id         TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name               TEXT NOT NULL,
    severity           TEXT NOT NULL,
    last_update_status TEXT NOT NULL,
    duration           INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
) STRICT;
CREATE INDEX status_incidents_account ON status_incidents(account_id, created_at, id);

-- Every incident keeps at least one service: a service named by an incident is not
-- deleted (no cascade; the store answers a conflict first).
CREATE TABLE status_incident_services (
    incident_id TEXT NOT NULL REFERENCES status_incidents(id) ON DELETE CASCADE,
    service_id  TEXT NOT NULL REFERENCES status_services(id),
    position    INTEGER NOT NULL,
    PRIMARY KEY (incident_id, service_id)
) STRICT;
CREATE INDEX status_incident_services_service ON status_incident_services(service_id);

CREATE TABLE status_incident_updates (
    id                 TEXT PRIMARY KEY NOT NULL,
    incident_id        TEXT NOT NULL REFERENCES status_incidents(id) ON DELETE CASCADE,
    description        TEXT NOT NULL,
    status             TEXT NOT NULL,
    public_at          INTEGER NOT NULL,
    notify_subscribers INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
) STRICT;
CREATE INDEX status_incident_updates_incident
    ON status_incident_updates(incident_id, public_at, created_at);

-- `address_key` is the address lowercased: one subscription per address and page.
CREATE TABLE status_page_subscriptions (
    id          TEXT PRIMARY KEY NOT NULL,
    page_id     TEXT NOT NULL REFERENCES status_pages(id) ON DELETE CASCADE,
    type        TEXT NOT NULL,
    address     TEXT NOT NULL,
    address_key TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX status_page_subscriptions_address
    ON status_page_subscriptions(page_id, type, address_key);

-- Incident updates to send to the subscribers of the pages showing the incident's
-- services; one row per update, written in the transaction that stores the update.
CREATE TABLE status_notifications (
    id                 TEXT PRIMARY KEY NOT NULL,
    account_id         TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    incident_id        TEXT NOT NULL REFERENCES status_incidents(id) ON DELETE CASCADE,
    incident_update_id TEXT NOT NULL UNIQUE
                       REFERENCES status_incident_updates(id) ON DELETE CASCADE,
    created_at         INTEGER NOT NULL,
    delivered_at       INTEGER
) STRICT;
CREATE INDEX status_notifications_pending ON status_notifications(created_at)
    WHERE delivered_at IS NULL;

-- Services link to checks through the check document's triggerIncident.serviceId (the
-- reference's field); this index makes the link a lookup.
CREATE INDEX checks_trigger_service
    ON checks(account_id, json_extract(document, '$.triggerIncident.serviceId'));
