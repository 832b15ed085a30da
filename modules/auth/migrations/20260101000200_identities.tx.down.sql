DROP TABLE IF EXISTS oauth_spent_states;
DROP TABLE IF EXISTS user_identities;
