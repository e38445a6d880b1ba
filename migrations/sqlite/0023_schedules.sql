-- Schedules (SPEC §13): runs started on a cron in a named time zone, owned by their creator.
-- `next_due_at` is the next due time; `schedule_fires` holds one row per (schedule, due time):
-- the replica that inserts it fires that due time, so each fires once across replicas.
CREATE TABLE schedules (
    id              TEXT PRIMARY KEY,
    owner           TEXT,
    key_id          TEXT,
    agent           TEXT NOT NULL,
    prompt          TEXT NOT NULL,
    cron            TEXT NOT NULL,
    timezone        TEXT NOT NULL,
    conversation_id TEXT,
    overlap         TEXT NOT NULL,
    missed          TEXT NOT NULL,
    webhook_url     TEXT,
    enabled         INTEGER NOT NULL,
    next_due_at     TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX schedules_due ON schedules (enabled, next_due_at);
CREATE TABLE schedule_fires (
    schedule_id TEXT NOT NULL,
    due_at      TEXT NOT NULL,
    replica     TEXT NOT NULL,
    status      TEXT NOT NULL,
    run_id      TEXT,
    fired_at    TEXT NOT NULL,
    PRIMARY KEY (schedule_id, due_at)
);
