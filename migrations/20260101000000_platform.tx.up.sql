CREATE TABLE IF NOT EXISTS users (
    id              bigserial PRIMARY KEY,
    email           text        NOT NULL,
    full_name       text        NOT NULL DEFAULT '',
    organization    text        NOT NULL DEFAULT '',
    role            text        NOT NULL DEFAULT 'User' CHECK (role IN ('User', 'Admin')),
    password_hash   text,
    security_stamp  bigint      NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    deleted_at      timestamptz
);
-- Emails are unique case-insensitively among live accounts.
CREATE UNIQUE INDEX IF NOT EXISTS users_email_live_uq ON users (lower(email)) WHERE deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS users_role_idx ON users (role) WHERE deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS users_created_idx ON users (created_at DESC, id DESC);

CREATE TABLE IF NOT EXISTS audit_events (
    id            bigserial PRIMARY KEY,
    occurred_at   timestamptz NOT NULL DEFAULT now(),
    actor_user_id bigint,
    user_id       bigint,
    action        text        NOT NULL,
    target_type   text        NOT NULL DEFAULT '',
    target_id     text        NOT NULL DEFAULT '',
    ip            text        NOT NULL DEFAULT '',
    user_agent    text        NOT NULL DEFAULT '',
    details       jsonb       NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX IF NOT EXISTS audit_events_user_idx ON audit_events (user_id, occurred_at DESC);
CREATE INDEX IF NOT EXISTS audit_events_action_idx ON audit_events (action, occurred_at DESC);
CREATE INDEX IF NOT EXISTS audit_events_time_idx ON audit_events (occurred_at DESC, id DESC);
