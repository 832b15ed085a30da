-- Access credentials join the finisher (platform/provision): a row left Creating by a crash (the
-- client never got its password) is undone, and a Deleting row (the intent of a delete, stored
-- before the engine is asked) is dropped on the engine, both in the background.
ALTER TABLE access_credentials
    ADD COLUMN IF NOT EXISTS attempts        int         NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS next_attempt_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN IF NOT EXISTS last_error      text        NOT NULL DEFAULT '';
ALTER TABLE access_credentials DROP CONSTRAINT IF EXISTS access_credentials_status_check;
ALTER TABLE access_credentials ADD CONSTRAINT access_credentials_status_check
    CHECK (status IN ('Creating', 'Active', 'Deleting', 'Deleted'));
-- A create still in progress on a replica running the previous version keeps its minute.
UPDATE access_credentials SET next_attempt_at = now() + interval '1 minute' WHERE status = 'Creating';
CREATE INDEX IF NOT EXISTS access_credentials_inflight_idx ON access_credentials (next_attempt_at)
    WHERE status IN ('Creating', 'Deleting');
