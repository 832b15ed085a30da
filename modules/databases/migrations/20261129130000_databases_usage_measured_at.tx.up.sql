-- When the usage refresh last measured a database (null: never). Growth from the first figure is
-- not activity (a fresh PostgreSQL database already measures megabytes); growth from any later
-- one is, from 0 too (an empty MySQL/MariaDB database measures 0).
ALTER TABLE database_instances ADD COLUMN IF NOT EXISTS usage_measured_at timestamptz;
