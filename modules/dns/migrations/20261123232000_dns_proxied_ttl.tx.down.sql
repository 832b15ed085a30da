-- Nothing to undo: the requested TTLs of proxied records were never sent to the provider.
SELECT 1;
