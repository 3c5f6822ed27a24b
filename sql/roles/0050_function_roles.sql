-- One login role per function, each with only the privileges its queries
-- need (docs/DEPLOY.md, "Database roles"). The migrate function, as the
-- master user, owns every table; no function role owns anything or may
-- create anything, so none can run DDL.
--
-- This file is applied to the control database and to every shard (package
-- sql embeds it in both); 0051 of each grants that database's tables.
-- Roles belong to the server, not to a database: on AWS every cluster
-- (control and each shard) gets its own; on a local server shared by
-- several databases the first migration creates them and the others find
-- them. On Aurora the roles are granted rds_iam: they log in with IAM
-- authentication tokens only, never with a password.
--
-- A migration that adds a table grants it, in the same file, to the roles
-- that need it (numbered after 0051, so that the roles exist); the test
-- functions/stores/pgstore/roles_test.go holds the expected privileges of every
-- table and fails on a table it does not know.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['catalog_upload', 'catalog_diff', 'catalog_apply', 'catalog_read',
                             'catalog_relay', 'catalog_consumers', 'catalog_ops'] LOOP
        BEGIN
            EXECUTE format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', r);
            IF r = 'catalog_read' THEN
                -- The storefront never writes, even by mistake.
                ALTER ROLE catalog_read SET default_transaction_read_only = on;
            END IF;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL; -- made by another database's migration on the same server
        END;
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rds_iam')
           AND NOT pg_has_role(r, 'rds_iam', 'MEMBER') THEN
            EXECUTE format('GRANT rds_iam TO %I', r);
        END IF;
        EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), r);
    END LOOP;
    -- Only the owner and the roles above connect; nobody else makes objects.
    EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
END $$;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO catalog_upload, catalog_diff, catalog_apply, catalog_read,
    catalog_relay, catalog_consumers, catalog_ops;

