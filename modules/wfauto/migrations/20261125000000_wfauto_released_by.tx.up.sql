-- Who deleted the owner of an account being deprovisioned: the wfauto.deprovisioned event, written
-- by the finisher once the cell has deleted the account, names them as its actor (as dns.revoked
-- and database.deleted do, written in the deleting transaction). NULL when not known.
ALTER TABLE wfauto_accounts ADD COLUMN IF NOT EXISTS released_by bigint;
