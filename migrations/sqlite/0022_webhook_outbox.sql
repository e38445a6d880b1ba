-- Webhooks (SPEC §13): a durable outbox. A row is one message to one receiver, with the
-- `webhook-id` it keeps on every attempt; any replica delivers it, holding a lease
-- (`lease_holder` until `lease_until`) so two replicas never send the same attempt.
CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    url             TEXT NOT NULL,
    secret          TEXT NOT NULL,
    event           TEXT NOT NULL,
    payload         TEXT NOT NULL,
    user_id         TEXT,
    run_id          TEXT,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    lease_holder    TEXT,
    lease_until     TEXT,
    last_status     INTEGER,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    delivered_at    TEXT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at DESC, id DESC);
