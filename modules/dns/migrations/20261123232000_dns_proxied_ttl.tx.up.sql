-- A proxied record's TTL is automatic (1) at the provider whatever was asked: rows stored before
-- record_ttl followed the provider showed the requested value.
UPDATE dns_records SET record_ttl = 1 WHERE proxied AND record_ttl <> 1;
