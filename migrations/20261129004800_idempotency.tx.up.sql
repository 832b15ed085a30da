-- The first answer to each Idempotency-Key (platform/idempotency), per user, operation and key.
-- request and answer are sealed with Secrets:EncryptionKey: the request's digest (its body may hold
-- a password) and the answer's headers and body (a new AI key, a password). A row whose answer is
-- NULL is in flight: owner is the request answering it, until lease_until (extended while it runs).
CREATE TABLE IF NOT EXISTS idempotency_keys (
    user_id      bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    operation    text        NOT NULL,
    key          text        NOT NULL,
    request      text        NOT NULL,
    owner        uuid,
    lease_until  timestamptz,
    status       integer,
    answer       text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (user_id, operation, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_expires_idx ON idempotency_keys (expires_at);
