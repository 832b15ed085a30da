-- The intent to delete, at the provider, a record that one of our rows may have left there while the
-- row is not live (Failed, or Revoked without its record having been deleted): the background
-- finisher looks the name up and deletes only a record carrying that row's comment.
CREATE TABLE IF NOT EXISTS dns_leftovers (
    id              bigserial PRIMARY KEY,
    record_id       bigint      NOT NULL REFERENCES dns_records (id) ON DELETE CASCADE,
    status          text        NOT NULL DEFAULT 'Sweeping' CHECK (status IN ('Sweeping', 'Swept')),
    attempts        int         NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS dns_leftovers_inflight_idx ON dns_leftovers (next_attempt_at) WHERE status = 'Sweeping';
CREATE INDEX IF NOT EXISTS dns_leftovers_record_idx ON dns_leftovers (record_id) WHERE status = 'Sweeping';
-- Rows that ended before this table existed and may have left a record at the provider: Failed
-- after attempts without an answer, and Revoked without a provider id after such attempts (a
-- deleted user's Failed record revoked at once because another row held its label).
INSERT INTO dns_leftovers (record_id)
SELECT id FROM dns_records WHERE status IN ('Failed', 'Revoked') AND provider_record_id = '' AND attempts > 0;
