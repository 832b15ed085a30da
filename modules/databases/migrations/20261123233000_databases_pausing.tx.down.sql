DROP INDEX IF EXISTS database_instances_inflight_idx;
CREATE INDEX IF NOT EXISTS database_instances_inflight_idx ON database_instances (next_attempt_at)
    WHERE status IN ('Provisioning', 'Deleting');
-- An unfinished pause or resume is back where it started (its engine state may be half-done:
-- pause or resume it again).
UPDATE database_instances SET status = 'Active' WHERE status = 'Pausing';
UPDATE database_instances SET status = 'Paused' WHERE status = 'Resuming';
ALTER TABLE database_instances DROP CONSTRAINT IF EXISTS database_instances_status_check;
ALTER TABLE database_instances ADD CONSTRAINT database_instances_status_check
    CHECK (status IN ('Provisioning', 'Active', 'Paused', 'Failed', 'Deleting', 'Deleted'));
