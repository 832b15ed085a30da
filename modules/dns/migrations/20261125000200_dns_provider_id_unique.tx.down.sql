DROP INDEX IF EXISTS dns_records_provider_id_uq;
