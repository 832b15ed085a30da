DROP TABLE IF EXISTS access_credentials;
DROP TABLE IF EXISTS database_instances;
