-- Substring search of users by name or email (GET /api/users?search=) through a trigram index.
-- pg_trgm is a trusted extension (PostgreSQL 13+): a database owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX IF NOT EXISTS users_search_trgm_idx ON users
    USING gin ((lower(email) || ' ' || lower(full_name)) gin_trgm_ops) WHERE deleted_at IS NULL;
