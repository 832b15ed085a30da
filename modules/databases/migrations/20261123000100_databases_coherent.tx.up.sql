-- A user's own list of databases is cached by user id (platform/coherent): every change to one of
-- their rows drops it on every replica.
SELECT coherent_watch('database_instances', 'user_id');
