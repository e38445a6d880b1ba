-- API keys created at run time (`POST /v1/keys`, SPEC §12). Only a SHA-256 digest of the key
-- is kept (`secret_hash`, hex; the key is 256 random bits, so no slow hash is needed) with its
-- first characters for people to recognise it (`prefix`). `scopes` is space-separated (its
-- `agents:NAME:run` scopes are the key's agents); `limits` is the JSON of `auth.keys[].limits`. A revoked key keeps its row (`revoked_at`) and is refused.
CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    user_id     TEXT,
    created_by  TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    prefix      TEXT NOT NULL,
    scopes      TEXT NOT NULL,
    limits      TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ,
    rotated_at  TIMESTAMPTZ,
    revoked_at  TIMESTAMPTZ
);
