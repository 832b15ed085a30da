-- Pause and resume join the finisher (platform/provision): the request stores the intent
-- (Pausing, Resuming) before the engine is asked, and a pause or resume that a crash or a failed
-- engine call left half-done is finished in the background.
ALTER TABLE database_instances DROP CONSTRAINT IF EXISTS database_instances_status_check;
ALTER TABLE database_instances ADD CONSTRAINT database_instances_status_check
    CHECK (status IN ('Provisioning', 'Active', 'Pausing', 'Paused', 'Resuming', 'Failed', 'Deleting', 'Deleted'));
DROP INDEX IF EXISTS database_instances_inflight_idx;
CREATE INDEX IF NOT EXISTS database_instances_inflight_idx ON database_instances (next_attempt_at)
    WHERE status IN ('Provisioning', 'Pausing', 'Resuming', 'Deleting');
