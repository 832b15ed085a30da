-- A reset link is for the address it was mailed to. An admin's change of users.email used to leave
-- the links mailed to the old address alive: whoever reads the old mailbox (a former employee's, a
-- recycled address) could still set the password. Now a change of the email spends every
-- outstanding link of the account (as a reset does), and each link records the address it was
-- mailed to: a reset only sets the password, and proves the email, while the account still has
-- that address (which also covers a link mailed while the email was being changed).
ALTER TABLE password_reset_tokens ADD COLUMN IF NOT EXISTS email text;
-- Links outstanding now were mailed to the account's current address.
UPDATE password_reset_tokens t SET email = u.email FROM users u WHERE u.id = t.user_id AND t.email IS NULL;
ALTER TABLE password_reset_tokens ALTER COLUMN email SET NOT NULL;

CREATE OR REPLACE FUNCTION auth_spend_reset_links() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE password_reset_tokens SET used_at = now() WHERE user_id = NEW.id AND used_at IS NULL;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS users_email_changed_spend_reset_links ON users;
CREATE TRIGGER users_email_changed_spend_reset_links AFTER UPDATE OF email ON users FOR EACH ROW
    WHEN (OLD.email IS DISTINCT FROM NEW.email) EXECUTE FUNCTION auth_spend_reset_links();
