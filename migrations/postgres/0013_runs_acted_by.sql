-- The admin that started a run acting for its user (issue 37): its owner id (`key:ID`), or
-- `admin` on a server without keys; NULL for a run its owner started itself.
ALTER TABLE runs ADD COLUMN acted_by TEXT;
