-- The admin list filtered by status (GET /api/database-instances?status=), newest first, and its
-- count read this index instead of every row.
CREATE INDEX IF NOT EXISTS database_instances_status_idx ON database_instances (status, created_at DESC, id DESC);
