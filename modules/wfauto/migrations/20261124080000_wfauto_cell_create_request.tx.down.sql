ALTER TABLE wfauto_cell_creates DROP COLUMN IF EXISTS request;
