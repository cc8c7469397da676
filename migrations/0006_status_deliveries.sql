-- Outpost control plane, schema version 6: per-subscriber delivery of status
-- notifications. A row says what became of one notification for one subscriber
-- address (lowercased, as `status_page_subscriptions.address_key`): SENT (the SMTP
-- server accepted it) or FAILED (refused for good, or given up). A subscriber without a
-- row is still to be told; a notification is marked delivered once every subscriber
-- has one, so a restart neither loses nor resends what was delivered.

CREATE TABLE status_notification_deliveries (
    notification_id TEXT NOT NULL REFERENCES status_notifications(id) ON DELETE CASCADE,
    address_key     TEXT NOT NULL,
    address         TEXT NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('SENT', 'FAILED')),
    attempts        INTEGER NOT NULL,
    error           TEXT,
    at              INTEGER NOT NULL,
    PRIMARY KEY (notification_id, address_key)
) STRICT;
