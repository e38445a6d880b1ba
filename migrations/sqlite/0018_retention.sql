-- Retention (SPEC §14): one replica at a time sweeps, holding the `retention` lease row until
-- `expires_at`; the indexes let each small batch find its oldest rows without a scan.
CREATE TABLE sweep_leases (
    name       TEXT PRIMARY KEY NOT NULL,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX run_events_ts ON run_events (ts);
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX conversations_updated ON conversations (updated_at);
CREATE INDEX responses_created ON responses (created_at);
