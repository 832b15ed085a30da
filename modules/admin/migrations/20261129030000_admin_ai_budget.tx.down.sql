ALTER TABLE users DROP COLUMN IF EXISTS ai_monthly_token_budget;
