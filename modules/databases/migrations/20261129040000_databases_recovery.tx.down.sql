DROP INDEX IF EXISTS database_instances_inflight_idx;
CREATE INDEX IF NOT EXISTS database_instances_inflight_idx ON database_instances (next_attempt_at)
    WHERE status IN ('Provisioning', 'Pausing', 'Resuming', 'Deleting');
-- A database in its recovery window is dropped by the next finisher poll; one being restored is
-- resumed (its logins allowed) like a paused one.
UPDATE database_instances SET status = 'Deleting', next_attempt_at = now() WHERE status = 'Recoverable';
UPDATE database_instances SET status = 'Resuming' WHERE status = 'Restoring';
ALTER TABLE database_instances DROP CONSTRAINT IF EXISTS database_instances_status_check;
ALTER TABLE database_instances ADD CONSTRAINT database_instances_status_check
    CHECK (status IN ('Provisioning', 'Active', 'Pausing', 'Paused', 'Resuming', 'Failed', 'Deleting', 'Deleted'));
ALTER TABLE database_instances DROP COLUMN IF EXISTS purge_at;
