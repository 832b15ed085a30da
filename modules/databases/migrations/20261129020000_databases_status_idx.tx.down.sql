DROP INDEX IF EXISTS database_instances_status_idx;
