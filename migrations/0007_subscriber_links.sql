-- Outpost control plane, schema version 7: the links in mails to status page
-- subscribers, and the queue of confirmation mails.
--
-- Every link carries a random token (256 bits, see src/service/keys.rs); only the hex
-- of its SHA-256 is kept here. VERIFY tokens go out in confirmation mails and turn a
-- PENDING subscription VERIFIED (each once: `used_at`); UNSUBSCRIBE tokens go out in
-- every mail and delete the subscription (the tokens go with it). A subscription has
-- as many tokens as mails were sent to it, so the link of every mail keeps working.

CREATE TABLE status_subscription_tokens (
    token_hash      TEXT PRIMARY KEY NOT NULL,
    subscription_id TEXT NOT NULL
                    REFERENCES status_page_subscriptions(id) ON DELETE CASCADE,
    purpose         TEXT NOT NULL CHECK (purpose IN ('VERIFY', 'UNSUBSCRIBE')),
    created_at      INTEGER NOT NULL,
    used_at         INTEGER
) STRICT;
CREATE INDEX status_subscription_tokens_subscription
    ON status_subscription_tokens(subscription_id);

-- Confirmation mails of PENDING e-mail subscriptions: one row per subscription,
-- written in the transaction that creates it. `outcome` is set once the SMTP server
-- accepted the mail (SENT) or refused it for good (FAILED, also after 24 h of
-- transient failures); a row without one is still to be sent, also after a restart.
CREATE TABLE status_subscription_confirmations (
    subscription_id TEXT PRIMARY KEY NOT NULL
                    REFERENCES status_page_subscriptions(id) ON DELETE CASCADE,
    created_at      INTEGER NOT NULL,
    outcome         TEXT CHECK (outcome IN ('SENT', 'FAILED')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    error           TEXT,
    at              INTEGER
) STRICT;
CREATE INDEX status_subscription_confirmations_pending
    ON status_subscription_confirmations(created_at) WHERE outcome IS NULL;

-- E-mail subscriptions left PENDING by earlier versions (which sent no confirmation)
-- get their confirmation mail now; their 24 hours start with this migration.
INSERT INTO status_subscription_confirmations (subscription_id, created_at)
SELECT id, CAST(strftime('%s', 'now') AS INTEGER) * 1000
FROM status_page_subscriptions WHERE status = 'PENDING' AND type = 'EMAIL';
