-- The control database lets in only the roles granted CONNECT, never PUBLIC: when tenant databases
-- share its cluster, a tenant's role could otherwise connect, read the catalogues, LISTEN to and
-- forge the change feed (pg_notify('coherent', ...)) of platform/coherent. The service's own role
-- gets an explicit grant first, in case it is not the owner and connects through PUBLIC's grant.
DO $$
BEGIN
    BEGIN
        EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO CURRENT_USER', current_database());
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE WARNING 'cannot grant CONNECT on the control database to the service role: %', SQLERRM;
    END;
    EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
END $$;
