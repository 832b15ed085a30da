-- One row per account whose create may have reached the cell: written (and committed) before each
-- call, on a connection of its own, so it survives a crash between the call and the recorded
-- outcome. An account without a row was never sent (or only refused): deleting it skips the cell,
-- which has no lookup and would make the account to tell its id. No foreign key: its check would
-- wait on the account row, which the finisher holds locked while it calls the cell.
CREATE TABLE IF NOT EXISTS wfauto_cell_creates (
    account_id bigint      PRIMARY KEY,
    sent_at    timestamptz NOT NULL DEFAULT now()
);
-- Accounts stored before this table existed may have been sent.
INSERT INTO wfauto_cell_creates (account_id)
SELECT id FROM wfauto_accounts WHERE status <> 'Deprovisioned'
ON CONFLICT DO NOTHING;
