ALTER TABLE wfauto_accounts DROP COLUMN IF EXISTS released_by;
