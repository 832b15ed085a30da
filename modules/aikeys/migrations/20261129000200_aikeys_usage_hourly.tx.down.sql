DROP TABLE IF EXISTS ai_key_usage_hourly;
