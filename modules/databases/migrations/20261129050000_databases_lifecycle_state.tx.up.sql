-- The columns of the platform's lifecycle state (provision.State, provision.Retries's transitions):
-- error_message is the error a row shows its user once it failed. A Failed database showed its
-- last attempt's error, which becomes its error_message.
ALTER TABLE database_instances ADD COLUMN IF NOT EXISTS error_message text NOT NULL DEFAULT '';
UPDATE database_instances SET error_message = last_error WHERE status = 'Failed' AND error_message = '';
ALTER TABLE access_credentials ADD COLUMN IF NOT EXISTS error_message text NOT NULL DEFAULT '';
ALTER TABLE database_password_rotations ADD COLUMN IF NOT EXISTS error_message text NOT NULL DEFAULT '';
