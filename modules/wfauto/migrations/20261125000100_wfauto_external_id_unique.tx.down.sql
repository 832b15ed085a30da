DROP INDEX IF EXISTS wfauto_accounts_external_uq;
