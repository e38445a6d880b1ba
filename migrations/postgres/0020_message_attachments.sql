-- The attachments of a message (SPEC §11): a JSON array of their metadata (name, media_type,
-- bytes, sha256, file_id), never their bytes, which `blobs` keeps. A conversation continued
-- later, on any replica, loads them from there.
ALTER TABLE messages ADD COLUMN attachments JSONB;
