-- A row of run_events may hold several consecutive events of one run: the recorder writes all
-- of a run's events that reach one batch as one row (seq = the first event's, last_seq = the
-- last one's, type '' and data a JSON array of [seq, type, ts in µs, data]), so a streamed
-- answer costs the store a row per batch rather than a row per token. A row holding one event
-- keeps the old layout (last_seq NULL). Readers expand rows back into the same events.
ALTER TABLE run_events ADD COLUMN last_seq INTEGER;
