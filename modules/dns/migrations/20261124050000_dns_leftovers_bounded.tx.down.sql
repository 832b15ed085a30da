-- Without GaveUp a sweep is retried for ever: a given-up one is Sweeping again.
DROP INDEX IF EXISTS dns_leftovers_done_idx;
UPDATE dns_leftovers SET status = 'Sweeping', next_attempt_at = now() WHERE status = 'GaveUp';
ALTER TABLE dns_leftovers DROP CONSTRAINT IF EXISTS dns_leftovers_status_check;
ALTER TABLE dns_leftovers ADD CONSTRAINT dns_leftovers_status_check CHECK (status IN ('Sweeping', 'Swept'));
