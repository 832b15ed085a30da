-- A leftover sweep is bounded: one that keeps failing is given up (GaveUp, with its last error) once
-- it is 7 days old, and Swept and GaveUp sweeps are pruned 30 days after they ended (by updated_at).
ALTER TABLE dns_leftovers DROP CONSTRAINT IF EXISTS dns_leftovers_status_check;
ALTER TABLE dns_leftovers ADD CONSTRAINT dns_leftovers_status_check CHECK (status IN ('Sweeping', 'Swept', 'GaveUp'));
CREATE INDEX IF NOT EXISTS dns_leftovers_done_idx ON dns_leftovers (updated_at) WHERE status IN ('Swept', 'GaveUp');
