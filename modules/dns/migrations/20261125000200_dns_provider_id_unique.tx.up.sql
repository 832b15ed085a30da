-- One provider record per record row: a provider that answers a create with the id of a record
-- another row (not Revoked) holds is refused (the code checks first; this index closes the race).
-- Revoking the new row would otherwise delete the other user's record at the provider. Where such
-- duplicates already exist the index is not created (a warning says so): an operator resolves them.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM dns_records WHERE provider_record_id <> '' AND status <> 'Revoked'
               GROUP BY provider_record_id HAVING count(*) > 1) THEN
        RAISE WARNING 'dns_records: duplicate live provider_record_id values; dns_records_provider_id_uq not created';
    ELSE
        CREATE UNIQUE INDEX IF NOT EXISTS dns_records_provider_id_uq ON dns_records (provider_record_id)
            WHERE provider_record_id <> '' AND status <> 'Revoked';
    END IF;
END $$;
