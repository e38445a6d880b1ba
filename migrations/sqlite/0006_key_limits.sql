-- Per-key limits (SPEC §7, `auth.keys[].limits`), counted in the store so that every replica on
-- it shares them. Rows are only ever changed by single-statement upserts, so concurrent replicas
-- never lose an update.
--
-- Requests per fixed one-minute window (rows of past windows are pruned).
CREATE TABLE key_request_windows (
    key_id       TEXT NOT NULL,
    window_start TEXT NOT NULL,
    requests     INTEGER NOT NULL,
    PRIMARY KEY (key_id, window_start)
);
-- A key's runs in progress: slot N of `concurrentRuns` is held by one run of one replica
-- (`holder`) until `expires_at`, a lease its holder renews while the run lives, so the slots of
-- a killed process free themselves.
CREATE TABLE key_run_slots (
    key_id     TEXT NOT NULL,
    slot       INTEGER NOT NULL,
    run_id     TEXT NOT NULL,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    PRIMARY KEY (key_id, slot)
);
CREATE INDEX key_run_slots_holder ON key_run_slots (holder);
-- Tokens and cost of a key's finished runs per UTC day (`YYYY-MM-DD`).
CREATE TABLE key_daily_usage (
    key_id   TEXT NOT NULL,
    day      TEXT NOT NULL,
    tokens   INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    PRIMARY KEY (key_id, day)
);
