-- The change feed of platform/coherent: a row-level AFTER trigger with coherent_notify('<column>')
-- NOTIFYs "i <table> <value of column>" for every row it fires on (old and new value when an
-- update changes the column). PostgreSQL delivers the notifications at commit, in commit order,
-- and folds duplicates within a transaction. coherent_notify_all() (a statement-level trigger on
-- TRUNCATE) drops every entry of the table.
CREATE OR REPLACE FUNCTION coherent_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_key text;
    new_key text;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        old_key := to_jsonb(OLD) ->> TG_ARGV[0];
        PERFORM pg_notify('coherent', 'i ' || TG_TABLE_NAME || ' ' || coalesce(old_key, '*'));
    END IF;
    IF TG_OP <> 'DELETE' THEN
        new_key := to_jsonb(NEW) ->> TG_ARGV[0];
        IF TG_OP = 'INSERT' OR new_key IS DISTINCT FROM old_key THEN
            PERFORM pg_notify('coherent', 'i ' || TG_TABLE_NAME || ' ' || coalesce(new_key, '*'));
        END IF;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION coherent_notify_all() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('coherent', 'i ' || TG_TABLE_NAME || ' *');
    RETURN NULL;
END $$;

-- The principal of a token (platform/authn) is cached by user id.
DROP TRIGGER IF EXISTS users_coherent ON users;
CREATE TRIGGER users_coherent AFTER INSERT OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION coherent_notify('id');
DROP TRIGGER IF EXISTS users_coherent_update ON users;
CREATE TRIGGER users_coherent_update AFTER UPDATE ON users
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION coherent_notify('id');
DROP TRIGGER IF EXISTS users_coherent_truncate ON users;
CREATE TRIGGER users_coherent_truncate AFTER TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION coherent_notify_all();
