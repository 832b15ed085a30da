-- Usage over time: one row per key and hour (UTC), added to by the meter's batched flushes.
CREATE TABLE IF NOT EXISTS ai_key_usage_hourly (
    key_id            bigint      NOT NULL REFERENCES ai_keys (id) ON DELETE CASCADE,
    hour              timestamptz NOT NULL,
    requests          bigint      NOT NULL DEFAULT 0,
    prompt_tokens     bigint      NOT NULL DEFAULT 0,
    completion_tokens bigint      NOT NULL DEFAULT 0,
    refused           bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, hour)
);
