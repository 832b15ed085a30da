-- Rotation without downtime: each database has two login roles taking turns (its owner role and
-- <owner>_login); login_user is the one whose password is stored ('' = the owner role itself,
-- as every database made before had). rotation_days > 0 rotates it on a schedule: a Scheduled
-- row per database, due when the next rotation is.
ALTER TABLE database_instances
    ADD COLUMN IF NOT EXISTS login_user    text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS rotation_days int  NOT NULL DEFAULT 0 CHECK (rotation_days BETWEEN 0 AND 3650);

-- A rotation gives new_login the stored password and, after grace_seconds (at retire_at, status
-- Retiring), takes old_login's away. Rows of before (new_login '') set the stored password on
-- the current login in place.
ALTER TABLE database_password_rotations
    ADD COLUMN IF NOT EXISTS new_login     text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS old_login     text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS grace_seconds int  NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS retire_at     timestamptz;
ALTER TABLE database_password_rotations DROP CONSTRAINT IF EXISTS database_password_rotations_status_check;
ALTER TABLE database_password_rotations ADD CONSTRAINT database_password_rotations_status_check
    CHECK (status IN ('Scheduled', 'Pending', 'Retiring', 'Done'));
DROP INDEX IF EXISTS database_password_rotations_inflight_idx;
CREATE INDEX IF NOT EXISTS database_password_rotations_inflight_idx ON database_password_rotations (next_attempt_at)
    WHERE status IN ('Scheduled', 'Pending', 'Retiring');
CREATE INDEX IF NOT EXISTS database_password_rotations_open_idx ON database_password_rotations (database_instance_id)
    WHERE status <> 'Done';
