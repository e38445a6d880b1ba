-- Every event of a run (SPEC §4.2) in order, for SSE replay from a Last-Event-ID; the accounting
-- entries of each run (contract §4) with the columns reports filter on; the whole AgentResult.
-- No foreign keys to runs: events are written in batches off the hot path and must not be lost
-- because the run row could not be written.
CREATE TABLE run_events (
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    type   TEXT NOT NULL,
    data   TEXT NOT NULL,
    ts     TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE run_accounting (
    run_id   TEXT NOT NULL,
    idx      INTEGER NOT NULL,
    type     TEXT NOT NULL,
    provider TEXT,
    model    TEXT,
    tool     TEXT,
    status   TEXT NOT NULL,
    ts       TEXT NOT NULL,
    entry    TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
) WITHOUT ROWID;
CREATE INDEX run_accounting_provider_model ON run_accounting (provider, model, ts);

ALTER TABLE runs ADD COLUMN total_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN result TEXT;
