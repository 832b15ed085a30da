-- The Idempotency-Key sent to the cell for an account: a random UUID made with the row and kept
-- with it. The cell keeps a key's first answer, and two control databases sharing one cell
-- (staging and production, or a production restored from an older backup) number their rows
-- alike: keyed by the row's id, one deployment's user was answered with the other's account.
--
-- Rows stored before this column sent their id as the key. A row whose create may have reached
-- the cell (it has a wfauto_cell_creates row, or the cell's account id) keeps its id as its key:
-- its retries, and the re-post that learns its account id before a delete, must send the key the
-- cell saw, or the cell would make a second account (and the first one would never be deleted).
-- Every other row (never sent, only refused, or Deprovisioned) sends nothing under its old key
-- again: it gets a fresh random key, as new rows do. A UUID never reads as an id, so no new key
-- meets an old one. A kept id may still be another deployment's key at the cell: a cell that echoes
-- the email or userId it made the account for lets such an answer be refused (see the provisioner).
ALTER TABLE wfauto_accounts ADD COLUMN IF NOT EXISTS idempotency_key text;
UPDATE wfauto_accounts w SET idempotency_key = CASE
        WHEN w.external_account_id <> '' OR EXISTS (SELECT 1 FROM wfauto_cell_creates c WHERE c.account_id = w.id) THEN w.id::text
        ELSE gen_random_uuid()::text END
    WHERE idempotency_key IS NULL;
ALTER TABLE wfauto_accounts ALTER COLUMN idempotency_key SET DEFAULT gen_random_uuid()::text,
    ALTER COLUMN idempotency_key SET NOT NULL;
-- Never two accounts with one key.
CREATE UNIQUE INDEX IF NOT EXISTS wfauto_accounts_idempotency_key_uq ON wfauto_accounts (idempotency_key);
