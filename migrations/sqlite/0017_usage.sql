-- Usage reports (SPEC §14, `GET /v1/usage`): each accounting row keeps its tokens and cost in
-- columns a report sums, and each run the key that started it. Rows written before this
-- migration count zero tokens (their entries still hold them) and no key.
ALTER TABLE run_accounting ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_accounting ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_accounting ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_accounting ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE run_accounting ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN key_id TEXT;
CREATE INDEX runs_key_created ON runs (key_id, created_at);
