-- The privileges of the function roles (made by roles/0050_function_roles.sql)
-- on the shard database's tables: only what each function's queries need
-- (docs/DEPLOY.md, "Database roles"). Row locks count as writes: SELECT ...
-- FOR UPDATE or FOR KEY SHARE needs UPDATE on one of the row's columns.

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

-- Usage (DESIGN 10, sql/usage/0010_usage_daily.sql): counted in the transaction
-- of the work, the diff's state changes and each chunk's apply (ops'
-- repairs write like apply); upload reads it for the cost report.
GRANT SELECT, INSERT, UPDATE ON usage_daily TO catalog_diff, catalog_apply, catalog_ops;
GRANT SELECT ON usage_daily TO catalog_upload;
