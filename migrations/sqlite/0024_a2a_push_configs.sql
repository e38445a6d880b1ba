-- A2A push-notification configs (SPEC §13): a receiver a caller set for one task, owned by
-- that caller (`owner`); a task's state changes go to it through the webhook outbox, whose
-- messages now carry their own extra headers (the config's `X-A2A-Notification-Token`,
-- `Authorization`) as a JSON object in `headers`.
CREATE TABLE a2a_push_configs (
    task_id        TEXT NOT NULL,
    owner          TEXT NOT NULL,
    id             TEXT NOT NULL,
    url            TEXT NOT NULL,
    token          TEXT,
    auth_scheme    TEXT,
    auth_credentials TEXT,
    dialect        TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    PRIMARY KEY (task_id, owner, id)
);
ALTER TABLE webhook_deliveries ADD COLUMN headers TEXT;
