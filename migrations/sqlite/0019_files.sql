-- Attachments and the Files API (SPEC §11). Content is stored once per SHA-256 (`blobs`), cut
-- into chunks of at most 1 MiB (`blob_chunks`) so an upload is written, and a download read,
-- a chunk at a time. `files` are the per-owner records (`file-…` ids) the Files API lists and
-- that attachments in conversations and run events name; several records may share a blob,
-- which is deleted with the last record naming it.
CREATE TABLE blobs (
    sha256     TEXT PRIMARY KEY,
    bytes      INTEGER NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE blob_chunks (
    sha256 TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    data   BLOB NOT NULL,
    PRIMARY KEY (sha256, seq)
);

CREATE TABLE files (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL,
    filename   TEXT NOT NULL,
    purpose    TEXT NOT NULL,
    media_type TEXT NOT NULL,
    bytes      INTEGER NOT NULL,
    sha256     TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE INDEX files_by_user ON files (user_id, created_at, id);
CREATE INDEX files_by_blob ON files (sha256);
