-- Recoverable deletes: a deleted database is Recoverable (logins refused, kept on its engine) until
-- purge_at, when the finisher drops it (next_attempt_at is purge_at); a restore makes it Restoring,
-- which the finisher finishes as a resume. purge_at is set from the delete until the drop.
ALTER TABLE database_instances ADD COLUMN IF NOT EXISTS purge_at timestamptz;
ALTER TABLE database_instances DROP CONSTRAINT IF EXISTS database_instances_status_check;
ALTER TABLE database_instances ADD CONSTRAINT database_instances_status_check
    CHECK (status IN ('Provisioning', 'Active', 'Pausing', 'Paused', 'Resuming', 'Failed', 'Deleting', 'Recoverable',
                      'Restoring', 'Deleted'));
DROP INDEX IF EXISTS database_instances_inflight_idx;
CREATE INDEX IF NOT EXISTS database_instances_inflight_idx ON database_instances (next_attempt_at)
    WHERE status IN ('Provisioning', 'Pausing', 'Resuming', 'Deleting', 'Recoverable', 'Restoring');
