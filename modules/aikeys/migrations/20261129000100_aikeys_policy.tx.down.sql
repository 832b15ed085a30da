SELECT coherent_watch('ai_keys', 'id',
    ARRAY['user_id', 'key_hash', 'previous_hash', 'previous_valid_until', 'status', 'expires_at']);
ALTER TABLE ai_keys
    DROP COLUMN IF EXISTS allowed_models,
    DROP COLUMN IF EXISTS max_tokens_per_request,
    DROP COLUMN IF EXISTS token_budget,
    DROP COLUMN IF EXISTS request_budget,
    DROP COLUMN IF EXISTS budget_period;
