DROP TRIGGER IF EXISTS ai_keys_coherent_truncate ON ai_keys;
DROP TRIGGER IF EXISTS ai_keys_coherent_update ON ai_keys;
DROP TRIGGER IF EXISTS ai_keys_coherent ON ai_keys;
