-- A random token per record row, in the comment (dns.Marker) its provider record carries: only a
-- record carrying its row's comment is ever adopted or deleted, and a comment made only of the
-- user's and row's ids is the same for the rows of two deployments sharing one zone (staging and
-- production, or a production restored from an older backup), each of which would adopt, or
-- delete, the other's record. The database makes the token with each new row.
--
-- Rows stored before this column keep none (NULL): their provider records carry the comment
-- without a token, which such a row alone still recognises as its own (to adopt its record after a
-- lost answer, revoke it, or sweep it as a leftover). A row with a token never accepts a comment
-- without it, so no new row takes an older row's record, of this deployment or another.
ALTER TABLE dns_records ADD COLUMN IF NOT EXISTS marker_token text;
ALTER TABLE dns_records ALTER COLUMN marker_token SET DEFAULT replace(gen_random_uuid()::text, '-', '');
