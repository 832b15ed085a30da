DROP INDEX IF EXISTS access_credentials_inflight_idx;
-- A credential whose drop was not finished is back to Active, as before the delete was asked
-- (its role may be login-blocked on PostgreSQL: delete it again).
UPDATE access_credentials SET status = 'Active' WHERE status = 'Deleting';
ALTER TABLE access_credentials DROP CONSTRAINT IF EXISTS access_credentials_status_check;
ALTER TABLE access_credentials ADD CONSTRAINT access_credentials_status_check
    CHECK (status IN ('Creating', 'Active', 'Deleted'));
ALTER TABLE access_credentials
    DROP COLUMN IF EXISTS last_error,
    DROP COLUMN IF EXISTS next_attempt_at,
    DROP COLUMN IF EXISTS attempts;
