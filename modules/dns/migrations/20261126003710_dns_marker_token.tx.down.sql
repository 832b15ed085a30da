ALTER TABLE dns_records DROP COLUMN IF EXISTS marker_token;
