DROP TRIGGER IF EXISTS users_email_changed_spend_reset_links ON users;
DROP FUNCTION IF EXISTS auth_spend_reset_links();
ALTER TABLE password_reset_tokens DROP COLUMN IF EXISTS email;
