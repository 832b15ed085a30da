DROP INDEX IF EXISTS users_search_trgm_idx;
