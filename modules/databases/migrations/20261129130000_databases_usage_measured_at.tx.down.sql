ALTER TABLE database_instances DROP COLUMN IF EXISTS usage_measured_at;
