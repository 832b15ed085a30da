CREATE TABLE IF NOT EXISTS user_identities (
    id               bigserial PRIMARY KEY,
    user_id          bigint      NOT NULL REFERENCES users (id),
    provider         text        NOT NULL,
    provider_user_id text        NOT NULL,
    email            text        NOT NULL DEFAULT '',
    email_verified   boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (provider, provider_user_id)
);
CREATE INDEX IF NOT EXISTS user_identities_user_idx ON user_identities (user_id);

-- States of finished OAuth flows: a replayed callback is refused.
CREATE TABLE IF NOT EXISTS oauth_spent_states (
    state_hash bytea PRIMARY KEY,
    spent_at   timestamptz NOT NULL DEFAULT now()
);
