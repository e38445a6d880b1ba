-- Secrets users store for their tool calls (`PUT /api/{user_id}/secrets/{name}`), used by
-- `${caller.secret.NAME}` in tool headers. Values are never kept in the clear: `ciphertext` is
-- the AEAD output (ChaCha20-Poly1305 under `secrets.key`, the user id and name as associated
-- data, so a row copied to another user or name does not decrypt) and `nonce` its random nonce.
CREATE TABLE user_secrets (
    user_id    TEXT NOT NULL,
    name       TEXT NOT NULL,
    nonce      BYTEA NOT NULL,
    ciphertext BYTEA NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, name)
);
