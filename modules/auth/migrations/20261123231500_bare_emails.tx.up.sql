-- Emails stored before platform/emailaddr: register, admin create/update and Bootstrap:AdminEmail
-- took whatever net/mail.ParseAddress (huma's format:"email") accepted, and OAuth whatever the
-- provider sent, and stored it trimmed and lower-cased as typed: "eve <ada@example.com>",
-- "ada@example.com (work)", "ada"@example.com. Login and forgot-password now take only a bare
-- address, so those accounts could no longer sign in or reset their password. Each such users row
-- gets the bare address read from it, unless another live account already has that address
-- (lower(email), as users_email_live_uq compares; the older row wins when two such rows read the
-- same): that row is left as it is. Every change and every row left alone is reported: a WARNING
-- (in the PostgreSQL log) and an audit event, user.email_normalized {from, to} or
-- user.email_not_normalized {email, address, conflictsWith}, so nothing typed is lost. OAuth
-- identities' emails are rewritten too (they are not unique). Only ASCII addresses are read out;
-- anything else is reported, not guessed at.

-- auth_bare_email is the bare address in a stored email, or NULL when none can be read from it
-- with certainty (a quoted local part holding what a bare one cannot, a non-ASCII address).
CREATE OR REPLACE FUNCTION auth_bare_email(stored text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    s    text := lower(btrim(stored, E' \t\r\n'));
    addr text;
BEGIN
    -- A display name, then <address>, then perhaps comments.
    addr := substring(s FROM '<([^<>]*)>[[:space:]]*(?:\([^()"]*\)[[:space:]]*)*$');
    IF addr IS NULL THEN
        -- An address with comments around it.
        addr := substring(s FROM '^(?:\([^()"]*\)[[:space:]]*)*([^[:space:]()<>]+)[[:space:]]*(?:\([^()"]*\)[[:space:]]*)*$');
    END IF;
    -- A quoted local part holding nothing a bare one could not: "ada"@example.com.
    addr := regexp_replace(btrim(addr, E' \t\r\n'), '^"([a-z0-9!#$%&''*+/=?^_`{|}~.-]+)"@', '\1@');
    -- What emailaddr.Normalize accepts, in ASCII: a dot-atom local part at a host name.
    IF octet_length(addr) <= 254 AND octet_length(split_part(addr, '@', 1)) <= 64
       AND addr ~ '^[a-z0-9!#$%&''*+/=?^_`{|}~-]+(\.[a-z0-9!#$%&''*+/=?^_`{|}~-]+)*@[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$' THEN
        RETURN addr;
    END IF;
    RETURN NULL;
END $$;

DO $$
DECLARE
    -- A character emailaddr.Normalize refuses and every display name, comment or quote brings.
    not_bare CONSTANT text := '[[:space:][:cntrl:]"<>()\[\]\\,;:]';
    r        record;
    addr     text;
    other    bigint;
BEGIN
    FOR r IN SELECT id, email FROM users WHERE email ~ not_bare ORDER BY id FOR UPDATE LOOP
        addr := auth_bare_email(r.email);
        other := NULL;
        IF addr IS NOT NULL THEN
            SELECT id INTO other FROM users WHERE lower(email) = addr AND id <> r.id AND deleted_at IS NULL ORDER BY id LIMIT 1;
        END IF;
        IF addr IS NULL OR other IS NOT NULL THEN
            RAISE WARNING 'users.id %: email % is not a bare address; left as it is (%)', r.id, quote_literal(r.email),
                CASE WHEN addr IS NULL THEN 'no bare address can be read from it'
                     ELSE format('%s is the email of users.id %s', addr, other) END;
            INSERT INTO audit_events (user_id, action, target_type, target_id, details)
            VALUES (r.id, 'user.email_not_normalized', 'user', r.id::text,
                    jsonb_strip_nulls(jsonb_build_object('email', r.email, 'address', addr, 'conflictsWith', other)));
            CONTINUE;
        END IF;
        UPDATE users SET email = addr, updated_at = now() WHERE id = r.id;
        RAISE WARNING 'users.id %: email % is now %', r.id, quote_literal(r.email), addr;
        INSERT INTO audit_events (user_id, action, target_type, target_id, details)
        VALUES (r.id, 'user.email_normalized', 'user', r.id::text, jsonb_build_object('from', r.email, 'to', addr));
    END LOOP;

    FOR r IN SELECT id, user_id, email FROM user_identities WHERE email ~ not_bare ORDER BY id FOR UPDATE LOOP
        addr := auth_bare_email(r.email);
        IF addr IS NULL THEN
            RAISE WARNING 'user_identities.id %: email % is not a bare address; left as it is', r.id, quote_literal(r.email);
            CONTINUE;
        END IF;
        UPDATE user_identities SET email = addr WHERE id = r.id;
    END LOOP;
END $$;

DROP FUNCTION auth_bare_email(text);
