-- Why a database is read-only, as the API shows it (readOnlyReason): over its quota, or tables in
-- an engine whose size the server does not report (MySQL/MariaDB CSV). Written by the usage
-- refresher with read_only; '' while writable (and for a database read-only from before this
-- column until its next refresh).
ALTER TABLE database_instances ADD COLUMN IF NOT EXISTS read_only_reason text NOT NULL DEFAULT '';
