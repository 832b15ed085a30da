ALTER TABLE access_credentials DROP COLUMN IF EXISTS marker_token;
