-- Key checks are cached by key hash and dropped, on every replica, when what decides them changes
-- (platform/coherent). Usage counters (written every second by the meter) do not decide anything.
DROP TRIGGER IF EXISTS ai_keys_coherent ON ai_keys;
CREATE TRIGGER ai_keys_coherent AFTER INSERT OR DELETE ON ai_keys
    FOR EACH ROW EXECUTE FUNCTION coherent_notify('id');
DROP TRIGGER IF EXISTS ai_keys_coherent_update ON ai_keys;
CREATE TRIGGER ai_keys_coherent_update AFTER UPDATE ON ai_keys
    FOR EACH ROW WHEN (OLD.user_id IS DISTINCT FROM NEW.user_id
        OR OLD.key_hash IS DISTINCT FROM NEW.key_hash
        OR OLD.previous_hash IS DISTINCT FROM NEW.previous_hash
        OR OLD.previous_valid_until IS DISTINCT FROM NEW.previous_valid_until
        OR OLD.status IS DISTINCT FROM NEW.status
        OR OLD.expires_at IS DISTINCT FROM NEW.expires_at)
    EXECUTE FUNCTION coherent_notify('id');
DROP TRIGGER IF EXISTS ai_keys_coherent_truncate ON ai_keys;
CREATE TRIGGER ai_keys_coherent_truncate AFTER TRUNCATE ON ai_keys
    FOR EACH STATEMENT EXECUTE FUNCTION coherent_notify_all();
