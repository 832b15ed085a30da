-- Key checks are cached by key hash and dropped, on every replica, when what decides them changes
-- (platform/coherent). Usage counters (written every second by the meter) do not decide anything.
SELECT coherent_watch('ai_keys', 'id',
    ARRAY['user_id', 'key_hash', 'previous_hash', 'previous_valid_until', 'status', 'expires_at']);
