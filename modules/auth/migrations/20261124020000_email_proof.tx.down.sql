DROP TRIGGER IF EXISTS users_email_changed ON users;
DROP FUNCTION IF EXISTS auth_email_changed();
ALTER TABLE users DROP COLUMN IF EXISTS email_verified_at;
