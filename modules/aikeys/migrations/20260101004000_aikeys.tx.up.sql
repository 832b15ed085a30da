CREATE TABLE IF NOT EXISTS ai_keys (
    id                   bigserial PRIMARY KEY,
    user_id              bigint      NOT NULL REFERENCES users (id),
    name                 text        NOT NULL,
    prefix               text        NOT NULL,
    key_hash             bytea       NOT NULL,
    previous_hash        bytea,
    previous_valid_until timestamptz,
    status               text        NOT NULL CHECK (status IN ('Active', 'Revoked')),
    expires_at           timestamptz,
    last_used_at         timestamptz,
    requests             bigint      NOT NULL DEFAULT 0,
    prompt_tokens        bigint      NOT NULL DEFAULT 0,
    completion_tokens    bigint      NOT NULL DEFAULT 0,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    revoked_at           timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS ai_keys_hash_uq ON ai_keys (key_hash);
CREATE INDEX IF NOT EXISTS ai_keys_previous_idx ON ai_keys (previous_hash) WHERE previous_hash IS NOT NULL;
CREATE INDEX IF NOT EXISTS ai_keys_user_idx ON ai_keys (user_id, id);
