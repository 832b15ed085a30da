DROP TABLE IF EXISTS wfauto_accounts;
