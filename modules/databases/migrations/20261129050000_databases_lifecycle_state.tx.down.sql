ALTER TABLE database_password_rotations DROP COLUMN IF EXISTS error_message;
ALTER TABLE access_credentials DROP COLUMN IF EXISTS error_message;
ALTER TABLE database_instances DROP COLUMN IF EXISTS error_message;
