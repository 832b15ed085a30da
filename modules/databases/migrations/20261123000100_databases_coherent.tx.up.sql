-- A user's own list of databases is cached by user id (platform/coherent): every change to one of
-- their rows drops it on every replica.
DROP TRIGGER IF EXISTS database_instances_coherent ON database_instances;
CREATE TRIGGER database_instances_coherent AFTER INSERT OR DELETE ON database_instances
    FOR EACH ROW EXECUTE FUNCTION coherent_notify('user_id');
DROP TRIGGER IF EXISTS database_instances_coherent_update ON database_instances;
CREATE TRIGGER database_instances_coherent_update AFTER UPDATE ON database_instances
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION coherent_notify('user_id');
DROP TRIGGER IF EXISTS database_instances_coherent_truncate ON database_instances;
CREATE TRIGGER database_instances_coherent_truncate AFTER TRUNCATE ON database_instances
    FOR EACH STATEMENT EXECUTE FUNCTION coherent_notify_all();
