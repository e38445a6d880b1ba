-- A message sent with `busy: steer` joins the answer in progress (SPEC §13): its row turns
-- `joined`, names the run that answers it (`joined_to`), and carries the message's
-- attachments' metadata (a JSON array, never bytes) for whichever replica runs that answer.
ALTER TABLE conversation_turns ADD COLUMN attachments TEXT;
ALTER TABLE conversation_turns ADD COLUMN joined_to TEXT;
