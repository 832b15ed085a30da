SELECT coherent_unwatch('user_totp');
SELECT coherent_unwatch('auth_sessions');
DROP TABLE IF EXISTS user_recovery_codes;
DROP TABLE IF EXISTS user_totp;
DROP TABLE IF EXISTS auth_mfa_challenges;
DROP TABLE IF EXISTS auth_refresh_tokens;
DROP TABLE IF EXISTS auth_sessions;
