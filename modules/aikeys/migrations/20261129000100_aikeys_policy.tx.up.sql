-- A key's own policy (issue 32): models it may use (a subset of Ai:AllowedModels; NULL: the
-- platform's), its max_tokens cap (NULL: Ai:MaxTokensPerRequest), and its budgets per period
-- (NULL: none). Key checks read them, so the cache is dropped when they change.
ALTER TABLE ai_keys
    ADD COLUMN IF NOT EXISTS allowed_models         text[],
    ADD COLUMN IF NOT EXISTS max_tokens_per_request integer CHECK (max_tokens_per_request >= 1),
    ADD COLUMN IF NOT EXISTS token_budget           bigint  CHECK (token_budget >= 1),
    ADD COLUMN IF NOT EXISTS request_budget         bigint  CHECK (request_budget >= 1),
    ADD COLUMN IF NOT EXISTS budget_period          text    NOT NULL DEFAULT 'none' CHECK (budget_period IN ('day', 'month', 'none'));
SELECT coherent_watch('ai_keys', 'id',
    ARRAY['user_id', 'key_hash', 'previous_hash', 'previous_valid_until', 'status', 'expires_at',
          'allowed_models', 'max_tokens_per_request', 'token_budget', 'request_budget', 'budget_period']);
