CREATE TABLE IF NOT EXISTS dns_records (
    id                 bigserial PRIMARY KEY,
    user_id            bigint      NOT NULL REFERENCES users (id),
    label              text        NOT NULL,
    name               text        NOT NULL,
    fqdn               text        NOT NULL,
    content            text        NOT NULL,
    record_ttl         int         NOT NULL,
    proxied            boolean     NOT NULL DEFAULT false,
    status             text        NOT NULL CHECK (status IN ('Pending', 'Active', 'Failed', 'Revoking', 'Revoked')),
    provider_record_id text        NOT NULL DEFAULT '',
    error_message      text        NOT NULL DEFAULT '',
    attempts           int         NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz NOT NULL DEFAULT now(),
    last_error         text        NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
-- One live record per label in the cell: the 409 is race-free.
CREATE UNIQUE INDEX IF NOT EXISTS dns_records_label_live_uq ON dns_records (label) WHERE status IN ('Pending', 'Active', 'Revoking');
CREATE INDEX IF NOT EXISTS dns_records_user_idx ON dns_records (user_id, id);
CREATE INDEX IF NOT EXISTS dns_records_inflight_idx ON dns_records (next_attempt_at) WHERE status IN ('Pending', 'Revoking');
CREATE INDEX IF NOT EXISTS dns_records_list_idx ON dns_records (created_at DESC, id DESC);
