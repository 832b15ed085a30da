-- One cell account per account row: a cell that answers a provision with an accountId another
-- live row holds is refused (the code checks first; this index closes the race). Deleting the new
-- row would otherwise delete the other user's account at the cell. Where such duplicates already
-- exist the index is not created (a warning says so): an operator resolves them first.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM wfauto_accounts WHERE external_account_id <> '' AND status <> 'Deprovisioned'
               GROUP BY external_account_id HAVING count(*) > 1) THEN
        RAISE WARNING 'wfauto_accounts: duplicate live external_account_id values; wfauto_accounts_external_uq not created';
    ELSE
        CREATE UNIQUE INDEX IF NOT EXISTS wfauto_accounts_external_uq ON wfauto_accounts (external_account_id)
            WHERE external_account_id <> '' AND status <> 'Deprovisioned';
    END IF;
END $$;
