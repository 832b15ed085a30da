-- A rotation still Pending is lost: its new password is stored (password_sealed) but may not be
-- set on the engine yet. Reveal shows the stored one; an operator finds such databases in the
-- user.password.reset audit events (databasePasswordsRotated).
DROP TABLE IF EXISTS database_password_rotations;
