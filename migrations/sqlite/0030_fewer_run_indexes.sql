-- Fewer indexes every recorded run writes (each is one more page in every run's commit):
-- `run_accounting_provider_model` served no query (the usage report joins accounting rows by
-- run); the retention sweep finds expired runs through `runs_created_id` (a run ends after it
-- starts, so every run that ended before the cutoff started before it) instead of an index on
-- `finished_at`; and a run without a user (a server without keys) no longer adds a row to
-- `runs_user_created_id`, whose lookups are all `user_id = ?`, which implies its condition.
DROP INDEX run_accounting_provider_model;
DROP INDEX runs_finished;
DROP INDEX runs_user_created_id;
CREATE INDEX runs_user_created_id ON runs (user_id, created_at DESC, id DESC)
    WHERE user_id IS NOT NULL;
