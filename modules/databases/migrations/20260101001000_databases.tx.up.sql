CREATE TABLE IF NOT EXISTS database_instances (
    id               bigserial PRIMARY KEY,
    user_id          bigint      NOT NULL REFERENCES users (id),
    name             text        NOT NULL,
    engine           text        NOT NULL,
    database_name    text        NOT NULL,
    database_user    text        NOT NULL,
    password_sealed  text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('Provisioning', 'Active', 'Paused', 'Failed', 'Deleting', 'Deleted')),
    max_space_bytes  bigint      NOT NULL,
    used_space_bytes bigint      NOT NULL DEFAULT 0,
    read_only        boolean     NOT NULL DEFAULT false,
    last_activity    timestamptz,
    attempts         int         NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error       text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS database_instances_name_uq ON database_instances (engine, database_name);
CREATE INDEX IF NOT EXISTS database_instances_user_idx ON database_instances (user_id, id) WHERE status <> 'Deleted';
CREATE INDEX IF NOT EXISTS database_instances_inflight_idx ON database_instances (next_attempt_at)
    WHERE status IN ('Provisioning', 'Deleting');
CREATE INDEX IF NOT EXISTS database_instances_list_idx ON database_instances (created_at DESC, id DESC);

CREATE TABLE IF NOT EXISTS access_credentials (
    id                   bigserial PRIMARY KEY,
    database_instance_id bigint      NOT NULL REFERENCES database_instances (id),
    username             text        NOT NULL,
    password_sealed      text        NOT NULL,
    read_only            boolean     NOT NULL DEFAULT false,
    status               text        NOT NULL CHECK (status IN ('Creating', 'Active', 'Deleted')),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS access_credentials_username_uq ON access_credentials (username) WHERE status <> 'Deleted';
CREATE INDEX IF NOT EXISTS access_credentials_db_idx ON access_credentials (database_instance_id);
