-- The consumers find a retailer's shard (their version state lives there):
-- the registry's retailer_id and shard columns, nothing else (as the read
-- role). The role is made here, if need be, as 0050 makes it (this file is
-- numbered before the roles' 0050; on a new database 0050 then finds it).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'catalog_consumers') THEN
        BEGIN
            CREATE ROLE catalog_consumers LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
END $$;
GRANT SELECT (retailer_id, shard) ON retailers TO catalog_consumers;
