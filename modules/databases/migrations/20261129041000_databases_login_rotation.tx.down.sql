-- A database whose second login is current (login_user set) keeps working only while this
-- column exists: roll back only with every login_user '' (no rotation since the up).
DROP INDEX IF EXISTS database_password_rotations_open_idx;
DELETE FROM database_password_rotations WHERE status = 'Scheduled';
UPDATE database_password_rotations SET status = 'Done' WHERE status = 'Retiring';
ALTER TABLE database_password_rotations DROP CONSTRAINT IF EXISTS database_password_rotations_status_check;
ALTER TABLE database_password_rotations ADD CONSTRAINT database_password_rotations_status_check
    CHECK (status IN ('Pending', 'Done'));
DROP INDEX IF EXISTS database_password_rotations_inflight_idx;
CREATE INDEX IF NOT EXISTS database_password_rotations_inflight_idx ON database_password_rotations (next_attempt_at)
    WHERE status = 'Pending';
ALTER TABLE database_password_rotations
    DROP COLUMN IF EXISTS new_login, DROP COLUMN IF EXISTS old_login, DROP COLUMN IF EXISTS grace_seconds,
    DROP COLUMN IF EXISTS retire_at;
ALTER TABLE database_instances DROP COLUMN IF EXISTS login_user, DROP COLUMN IF EXISTS rotation_days;
