SELECT coherent_unwatch('users');
DROP FUNCTION IF EXISTS coherent_unwatch(regclass);
DROP FUNCTION IF EXISTS coherent_watch(regclass, text, text[]);
DROP FUNCTION IF EXISTS coherent_notify_all();
DROP FUNCTION IF EXISTS coherent_notify();
