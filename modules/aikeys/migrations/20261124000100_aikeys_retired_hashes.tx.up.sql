-- Every rotated-out key text keeps working until its own grace period ends, whatever later
-- rotations happen (ai_keys had room for one previous text, so a second rotation cut the first
-- one's grace short). One row per text in its grace period; the key's current text stays in
-- ai_keys.key_hash. Rows past valid_until are refused and pruned by the next rotation of the key.
CREATE TABLE IF NOT EXISTS ai_key_retired_hashes (
    hash        bytea       PRIMARY KEY,
    key_id      bigint      NOT NULL REFERENCES ai_keys (id) ON DELETE CASCADE,
    valid_until timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ai_key_retired_hashes_key_idx ON ai_key_retired_hashes (key_id, valid_until);

-- The cached key checks are tagged by key id: a change here drops them like a change of the key.
SELECT coherent_watch('ai_key_retired_hashes', 'key_id');

INSERT INTO ai_key_retired_hashes (hash, key_id, valid_until)
SELECT previous_hash, id, previous_valid_until FROM ai_keys
WHERE status = 'Active' AND previous_hash IS NOT NULL AND previous_valid_until > now()
ON CONFLICT (hash) DO NOTHING;

-- previous_hash and previous_valid_until are no longer read or written (kept, empty, so that a
-- replica of the previous version still running during the deployment does not fail on them).
UPDATE ai_keys SET previous_hash = NULL, previous_valid_until = NULL WHERE previous_hash IS NOT NULL;
