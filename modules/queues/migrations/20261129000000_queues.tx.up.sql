-- A queue space: a RabbitMQ virtual host and a user with every permission on it, both named by us
-- (vhost, username: random, never user text). The password is sealed (Secrets:EncryptionKey).
CREATE TABLE IF NOT EXISTS queue_spaces (
    id              bigserial PRIMARY KEY,
    user_id         bigint      NOT NULL REFERENCES users (id),
    name            text        NOT NULL,
    vhost           text        NOT NULL UNIQUE,
    username        text        NOT NULL UNIQUE,
    password_sealed text        NOT NULL,
    -- A new password (a takeover's) not yet set at the broker: the next create sets it.
    password_pending boolean    NOT NULL DEFAULT false,
    status          text        NOT NULL CHECK (status IN ('Provisioning', 'Active', 'Failed', 'Deleting', 'Deleted')),
    error_message   text        NOT NULL DEFAULT '',
    max_connections int         NOT NULL,
    max_queues      int         NOT NULL,
    attempts        int         NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS queue_spaces_inflight_idx ON queue_spaces (next_attempt_at) WHERE status IN ('Provisioning', 'Deleting');
CREATE INDEX IF NOT EXISTS queue_spaces_user_idx ON queue_spaces (user_id);
CREATE INDEX IF NOT EXISTS queue_spaces_list_idx ON queue_spaces (created_at DESC, id DESC);

-- The intent to make sure the broker holds nothing of a space that ended Failed (an attempt whose
-- answer was lost may have made its virtual host or user). Deleted once the broker answered.
-- No foreign key: its check would wait on the space row, which the finisher may hold locked.
CREATE TABLE IF NOT EXISTS queue_space_sweeps (
    id              bigserial PRIMARY KEY,
    space_id        bigint      NOT NULL,
    status          text        NOT NULL DEFAULT 'Pending' CHECK (status = 'Pending'),
    attempts        int         NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS queue_space_sweeps_due_idx ON queue_space_sweeps (next_attempt_at);
