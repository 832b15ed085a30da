-- An expiresAt past 9999-12-31T23:59:59.999999Z (say 9999-12-31T23:59:59-01:00, in year 10000 in
-- UTC) was accepted, and every answer showing the key then failed (500: its view writes the year in
-- four digits), its owner's whole key list included. Such a key now expires at the last instant
-- a view can show, less than a day earlier; creating one is a 400.
UPDATE ai_keys SET expires_at = '9999-12-31 23:59:59.999999+00', updated_at = now()
WHERE expires_at >= '10000-01-01 00:00:00+00';
