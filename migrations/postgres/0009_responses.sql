-- Responses API objects (SPEC §9.1): a response is a run (`run_id`); this row keeps what the
-- run does not: the request's echo fields and input items, the response it continues, and its
-- owner (`user_key`, '' for a keyless caller), so another user's id is a 404. Rows exist only
-- for `store: true` responses; DELETE removes the row (the run stays in the runs API).
CREATE TABLE responses (
    id                   TEXT PRIMARY KEY,
    run_id               TEXT NOT NULL,
    user_key             TEXT NOT NULL,
    previous_response_id TEXT,
    request              JSONB NOT NULL,
    input_items          JSONB NOT NULL,
    created_at           TIMESTAMPTZ NOT NULL
);
CREATE INDEX responses_user ON responses (user_key, created_at);
