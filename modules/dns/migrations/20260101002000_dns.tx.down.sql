DROP TABLE IF EXISTS dns_records;
