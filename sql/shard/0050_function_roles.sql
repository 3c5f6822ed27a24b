-- One login role per function, each with only the privileges its queries
-- need (docs/DEPLOY.md, "Database roles"). The migrate function, as the
-- master user, owns every table; no function role owns anything or may
-- create anything, so none can run DDL.
--
-- Roles belong to the server, not to a database: on AWS every cluster
-- (control and each shard) gets its own, created here and in the control
-- migration of the same number; on a local server shared by several
-- databases the first migration creates them and the others find them.
-- On Aurora the roles are granted rds_iam: they log in with IAM
-- authentication tokens only, never with a password.
--
-- A migration that adds a table grants it, in the same file, to the roles
-- that need it (numbered after this one, so that the roles exist); the
-- test functions/pgstore/roles_test.go holds the expected privileges of
-- every table and fails on a table it does not know.
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

-- upload: reserves generations, reports their status, confirms held ones.
-- It may raise reserved_generation only: the fence (latest_generation) and
-- the baseline are the diff's and the apply's.
GRANT SELECT, INSERT ON retailer_state TO catalog_upload;
GRANT UPDATE (reserved_generation) ON retailer_state TO catalog_upload;
GRANT SELECT, INSERT, UPDATE ON generations TO catalog_upload;

-- diff: raises the fence, moves its generation through diffing, held,
-- rejected, applying, supersedes older ones, and finishes a generation
-- that changes nothing (the new baseline). It never touches products.
GRANT SELECT ON retailer_state TO catalog_diff;
GRANT UPDATE (latest_generation, applied_generation, applied_products) ON retailer_state TO catalog_diff;
GRANT SELECT, UPDATE ON generations TO catalog_diff;

-- apply (apply-small and apply-large): fenced catalog writes under the
-- fence row (FOR KEY SHARE), chunks counted once, the baseline advanced.
-- Deleted products become tombstones (UPDATE): no DELETE on products.
GRANT SELECT ON retailer_state TO catalog_apply;
GRANT UPDATE (applied_generation, applied_products) ON retailer_state TO catalog_apply;
GRANT SELECT, UPDATE ON generations TO catalog_apply;
GRANT SELECT, INSERT, UPDATE ON products TO catalog_apply;
GRANT SELECT, INSERT ON applied_chunks TO catalog_apply;

-- Every state change and every catalog change writes its outbox row in the
-- same transaction (DESIGN 8): upload (superseded reservations), diff
-- (held, rejected, superseded), apply and ops (changes, applied).
GRANT INSERT ON outbox TO catalog_upload, catalog_diff, catalog_apply, catalog_ops;
GRANT USAGE ON SEQUENCE outbox_id_seq TO catalog_upload, catalog_diff, catalog_apply, catalog_ops;

-- read: the storefront reads the catalog and nothing else.
GRANT SELECT ON products TO catalog_read;

-- relay: publishes outbox rows (reading the products they refer to and the
-- generations of lifecycle events), marks and deletes them.
GRANT SELECT, UPDATE, DELETE ON outbox TO catalog_relay;
GRANT SELECT ON products, generations TO catalog_relay;

-- consumers: no catalog table (their state, if any, gets its own grants).

-- ops: reconciliation reads everything and repairs with fenced writes like
-- apply's (the fence row FOR KEY SHARE, no DELETE); the stuck-generation
-- sweeper re-drives generations.
GRANT SELECT ON retailer_state, generations, products, applied_chunks, outbox TO catalog_ops;
GRANT UPDATE (applied_generation, applied_products) ON retailer_state TO catalog_ops;
GRANT UPDATE ON generations TO catalog_ops;
GRANT INSERT, UPDATE ON products TO catalog_ops;
