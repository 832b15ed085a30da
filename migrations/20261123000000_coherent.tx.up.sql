-- The change feed of platform/coherent. A row-level AFTER trigger running coherent_notify('<column>')
-- NOTIFYs "i <table> <value of column>" for every row it fires on (old and new value when an update
-- changes the column). PostgreSQL delivers the notifications at commit, in commit order, and folds
-- duplicates within a transaction. coherent_notify_all() (a statement-level trigger on TRUNCATE)
-- drops every entry of the table.
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

-- coherent_watch puts a table on the feed, entries named by key_column: a module's migration calls
-- SELECT coherent_watch('<table>', '<column>') and its down migration coherent_unwatch('<table>').
-- Updates notify when any column changes, or, when watched is given, only when one of those does
-- (e.g. not for usage counters that no cache reads).
CREATE OR REPLACE FUNCTION coherent_watch(tbl regclass, key_column text, watched text[] DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    name text := (SELECT relname FROM pg_class WHERE oid = tbl);
    changed text := 'OLD.* IS DISTINCT FROM NEW.*';
BEGIN
    IF watched IS NOT NULL THEN
        SELECT string_agg(format('OLD.%1$I IS DISTINCT FROM NEW.%1$I', c), ' OR ') INTO changed FROM unnest(watched) c;
    END IF;
    PERFORM coherent_unwatch(tbl);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION coherent_notify(%L)',
        name || '_coherent', tbl, key_column);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %s FOR EACH ROW WHEN (%s) EXECUTE FUNCTION coherent_notify(%L)',
        name || '_coherent_update', tbl, changed, key_column);
    EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION coherent_notify_all()',
        name || '_coherent_truncate', tbl);
END $$;

CREATE OR REPLACE FUNCTION coherent_unwatch(tbl regclass) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    name text := (SELECT relname FROM pg_class WHERE oid = tbl);
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', name || '_coherent', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', name || '_coherent_update', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', name || '_coherent_truncate', tbl);
END $$;

-- The principal of a token (platform/authn) is cached by user id.
SELECT coherent_watch('users', 'id');
