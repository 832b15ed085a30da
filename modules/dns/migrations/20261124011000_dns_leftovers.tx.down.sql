DROP TABLE IF EXISTS dns_leftovers;
