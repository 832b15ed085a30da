CREATE TABLE IF NOT EXISTS wfauto_accounts (
    id                  bigserial PRIMARY KEY,
    user_id             bigint      NOT NULL REFERENCES users (id),
    status              text        NOT NULL CHECK (status IN ('Pending', 'Active', 'Failed', 'Deprovisioning', 'Deprovisioned')),
    external_account_id text        NOT NULL DEFAULT '',
    url                 text        NOT NULL DEFAULT '',
    error_message       text        NOT NULL DEFAULT '',
    attempts            int         NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    last_error          text        NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
-- One account per user: at most one row that is not Deprovisioned.
CREATE UNIQUE INDEX IF NOT EXISTS wfauto_accounts_user_uq ON wfauto_accounts (user_id) WHERE status <> 'Deprovisioned';
CREATE INDEX IF NOT EXISTS wfauto_accounts_inflight_idx ON wfauto_accounts (next_attempt_at) WHERE status IN ('Pending', 'Deprovisioning');
CREATE INDEX IF NOT EXISTS wfauto_accounts_list_idx ON wfauto_accounts (created_at DESC, id DESC);
