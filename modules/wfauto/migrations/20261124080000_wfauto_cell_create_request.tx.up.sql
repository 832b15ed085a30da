-- The body of the first create that may have reached the cell, as sent (the JSON bytes): every
-- later create of the account, and the re-post that learns its id before a delete, send it again,
-- so its Idempotency-Key always goes with the same body (a cell that fingerprints bodies per key
-- answers a different body with 422). NULL for records from before this column: their body is
-- not known.
ALTER TABLE wfauto_cell_creates ADD COLUMN IF NOT EXISTS request text;
