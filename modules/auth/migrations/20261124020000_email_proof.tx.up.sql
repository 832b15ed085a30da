-- users.email_verified_at: when the account's email was last proven to reach the account's owner;
-- NULL while it is not. Signing in with GitHub or Google links the provider identity to an existing
-- account only when the provider's email is verified AND the account's email is proven, so an
-- account made with an address its maker does not own (a password registration never proves the
-- address; an unverified provider email no longer creates an account) cannot collect the mailbox
-- owner's provider identity, and with it their resources.
-- Proven by: an account created from a provider's verified email; a password reset completed
-- through the link mailed to the address (the owner of the mailbox then holds the password, and
-- every earlier JWT is refused).
-- Unproven by: any change of users.email (an admin's PUT /api/users/{id}): the trigger below clears
-- it.
ALTER TABLE users ADD COLUMN IF NOT EXISTS email_verified_at timestamptz;

-- Existing accounts, conservatively: proven only where a verified provider identity linked to the
-- account has the same email. Any other account proves its email by a reset before a provider
-- identity may link to it.
UPDATE users u SET email_verified_at = now()
WHERE u.email_verified_at IS NULL
  AND EXISTS (SELECT 1 FROM user_identities i
              WHERE i.user_id = u.id AND i.email_verified AND lower(i.email) = lower(u.email));

CREATE OR REPLACE FUNCTION auth_email_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.email_verified_at := NULL;
    RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS users_email_changed ON users;
CREATE TRIGGER users_email_changed BEFORE UPDATE OF email ON users FOR EACH ROW
    WHEN (OLD.email IS DISTINCT FROM NEW.email) EXECUTE FUNCTION auth_email_changed();
