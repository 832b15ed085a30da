-- Back to one previous text per key: the latest grace period of each key survives.
UPDATE ai_keys k SET previous_hash = r.hash, previous_valid_until = r.valid_until
FROM (SELECT DISTINCT ON (key_id) key_id, hash, valid_until FROM ai_key_retired_hashes
      WHERE valid_until > now() ORDER BY key_id, valid_until DESC) r
WHERE k.id = r.key_id;
SELECT coherent_unwatch('ai_key_retired_hashes');
DROP TABLE IF EXISTS ai_key_retired_hashes;
