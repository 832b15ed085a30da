-- A random token per credential, in the mark (databases.CredentialMarker) its role carries on the
-- engine: a role is adopted (its password reset), stripped or dropped for a credential only when
-- it carries that credential's mark, and a mark made only of the credential's id is the same for
-- the credentials of two deployments sharing an engine (staging and production, or a production
-- restored from an older backup), whose rows are numbered alike. The database makes the token with
-- each new row.
--
-- Credentials stored before this column keep none (NULL): their roles carry the mark without a
-- token, which such a credential alone still recognises as its own. A credential with a token
-- never accepts a mark without it.
ALTER TABLE access_credentials ADD COLUMN IF NOT EXISTS marker_token text;
ALTER TABLE access_credentials ALTER COLUMN marker_token SET DEFAULT replace(gen_random_uuid()::text, '-', '');
