DROP TABLE IF EXISTS wfauto_cell_creates;
