-- Due times queued behind a schedule's running run (`overlap: queue` without a conversation,
-- SPEC §13): every replica looks for fires in status `queued`, so index the status.
CREATE INDEX schedule_fires_status ON schedule_fires (status, due_at);
