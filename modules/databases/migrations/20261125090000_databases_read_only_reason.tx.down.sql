ALTER TABLE database_instances DROP COLUMN IF EXISTS read_only_reason;
