DROP TRIGGER IF EXISTS users_coherent_truncate ON users;
DROP TRIGGER IF EXISTS users_coherent_update ON users;
DROP TRIGGER IF EXISTS users_coherent ON users;
DROP FUNCTION IF EXISTS coherent_notify_all();
DROP FUNCTION IF EXISTS coherent_notify();
