-- Owner password rotations (the outbox of a password reset that took an account over): the reset
-- stores each live database's new password (password_sealed) and a Pending row here in its own
-- transaction; the finisher (platform/provision) then sets the password on the engine, ends the
-- owner role's open sessions and marks the row Done, retrying at its capped backoff until it is.
CREATE TABLE IF NOT EXISTS database_password_rotations (
    id                   bigserial PRIMARY KEY,
    database_instance_id bigint      NOT NULL REFERENCES database_instances (id),
    status               text        NOT NULL DEFAULT 'Pending' CHECK (status IN ('Pending', 'Done')),
    reason               text        NOT NULL DEFAULT '',
    attempts             int         NOT NULL DEFAULT 0,
    next_attempt_at      timestamptz NOT NULL DEFAULT now(),
    last_error           text        NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS database_password_rotations_inflight_idx ON database_password_rotations (next_attempt_at)
    WHERE status = 'Pending';
CREATE INDEX IF NOT EXISTS database_password_rotations_pending_idx ON database_password_rotations (database_instance_id)
    WHERE status = 'Pending';
