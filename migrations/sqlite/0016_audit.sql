-- The audit log (SPEC §14): append-only rows of who did what, each carrying the hash of the row
-- before it (`prev_hash`) and its own (`hash`, SHA-256 over its fields and `prev_hash`), so an
-- edit or a deleted row in the middle shows when the chain is verified. `audit_head` is the
-- one-row lock every appender updates first: appends on every replica are serialised by it and
-- the chain never forks. Nothing in the API changes or deletes rows; only retention removes the
-- oldest.
CREATE TABLE audit (
    seq        INTEGER PRIMARY KEY NOT NULL,
    at         TEXT NOT NULL,
    actor_user TEXT,
    actor_key  TEXT,
    action     TEXT NOT NULL,
    target     TEXT,
    request_id TEXT,
    outcome    TEXT NOT NULL,
    details    TEXT,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);
CREATE INDEX audit_at ON audit (at);
CREATE INDEX audit_action_at ON audit (action, at);

CREATE TABLE audit_head (
    id   INTEGER PRIMARY KEY NOT NULL,
    seq  INTEGER NOT NULL,
    hash TEXT NOT NULL
);
INSERT INTO audit_head (id, seq, hash)
    VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
