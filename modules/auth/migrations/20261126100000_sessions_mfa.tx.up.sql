-- Sign-in sessions: every sign-in starts one; its access tokens carry its id (claim sid) and stop
-- working once revoked_at is set. stamp and role are the user's when the session started: a
-- refresh of a session whose user's stamp or role changed since (a password reset, a deletion, a
-- role change) ends it. expires_at is when its refresh token stops working (sliding).
CREATE TABLE IF NOT EXISTS auth_sessions (
    id             bigserial PRIMARY KEY,
    user_id        bigint      NOT NULL REFERENCES users (id),
    provider       text        NOT NULL,
    ip             text        NOT NULL DEFAULT '',
    user_agent     text        NOT NULL DEFAULT '',
    stamp          bigint      NOT NULL,
    role           text        NOT NULL,
    mfa_at         timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_used_at   timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    revoked_at     timestamptz,
    revoked_reason text        NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS auth_sessions_user_idx ON auth_sessions (user_id, created_at DESC) WHERE revoked_at IS NULL;

-- Refresh tokens, by SHA-256 only: the current one of a session (spent_at NULL) and the spent
-- ones, so that a spent token presented again is recognised (reuse detection).
CREATE TABLE IF NOT EXISTS auth_refresh_tokens (
    token_hash bytea       PRIMARY KEY,
    session_id bigint      NOT NULL REFERENCES auth_sessions (id) ON DELETE CASCADE,
    issued_at  timestamptz NOT NULL DEFAULT now(),
    spent_at   timestamptz
);
CREATE INDEX IF NOT EXISTS auth_refresh_tokens_session_idx ON auth_refresh_tokens (session_id);

-- A password (or provider) sign-in of a user with TOTP on waits here for the second factor.
CREATE TABLE IF NOT EXISTS auth_mfa_challenges (
    token_hash bytea       PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES users (id),
    provider   text        NOT NULL,
    stamp      bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS auth_mfa_challenges_user_idx ON auth_mfa_challenges (user_id);

-- TOTP (RFC 6238) of a user: the secret sealed (platform/secrets, bound to "totp:<user id>"),
-- on once enabled_at is set; last_step is the newest time step accepted (a code is accepted once).
CREATE TABLE IF NOT EXISTS user_totp (
    user_id       bigint      PRIMARY KEY REFERENCES users (id),
    secret_sealed text        NOT NULL,
    enabled_at    timestamptz,
    last_step     bigint      NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- Single-use recovery codes, by SHA-256 only (80 random bits each).
CREATE TABLE IF NOT EXISTS user_recovery_codes (
    id         bigserial   PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES users (id),
    code_hash  bytea       NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, code_hash)
);

-- The guard caches a session's state (platform/coherent), named by its user: a revocation, a
-- second factor passed, or TOTP turned on or off drops the user's entries on every replica.
SELECT coherent_watch('auth_sessions', 'user_id', ARRAY['revoked_at', 'mfa_at']);
SELECT coherent_watch('user_totp', 'user_id', ARRAY['enabled_at']);
