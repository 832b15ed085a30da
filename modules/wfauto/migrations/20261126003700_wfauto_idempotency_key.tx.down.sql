DROP INDEX IF EXISTS wfauto_accounts_idempotency_key_uq;
ALTER TABLE wfauto_accounts DROP COLUMN IF EXISTS idempotency_key;
