-- A user's AI token ceiling per calendar month (UTC), across all the user's AI keys together (NULL:
-- none). Admins set it through PUT /api/users/{id}; the aikeys module's key checks read it (users is
-- on the coherent feed, so a change is in force on every replica once answered).
ALTER TABLE users ADD COLUMN IF NOT EXISTS ai_monthly_token_budget bigint CHECK (ai_monthly_token_budget >= 1);
