-- The privileges of the function roles (made by roles/0050_function_roles.sql)
-- on the control database's tables: only what each function's queries need
-- (docs/DEPLOY.md, "Database roles"). Row locks count as writes: SELECT ...
-- FOR UPDATE or FOR KEY SHARE needs UPDATE on one of the row's columns.

-- Registry: upload onboards retailers and rotates their tokens and
-- settings; the pipeline looks up a retailer's shard and thresholds.
GRANT SELECT, INSERT, UPDATE ON retailers TO catalog_upload;
GRANT SELECT ON retailers TO catalog_diff, catalog_apply, catalog_ops;
-- The storefront routes by shard and never sees token hashes or settings.
GRANT SELECT (retailer_id, shard) ON retailers TO catalog_read;

-- Product directory: apply (and ops' repairs) keep it, fenced by generation;
-- the storefront's bare product lookup reads it.
GRANT SELECT, INSERT, UPDATE ON product_directory TO catalog_apply, catalog_ops;
GRANT SELECT ON product_directory TO catalog_read;

-- Usage (DESIGN 10, sql/usage/0010_usage_daily.sql and control/0011_usage_functions.sql, created before the roles
-- exist, hence granted here): every function adds what it counted in memory
-- (for the storefront the one thing it writes: its sessions are read-only
-- by default, the write asks for READ WRITE); upload reads it all for the
-- cost report. SELECT: the upsert adds to the row's current values.
GRANT SELECT, INSERT, UPDATE ON usage_daily, usage_functions
    TO catalog_upload, catalog_diff, catalog_apply, catalog_read, catalog_relay, catalog_consumers, catalog_ops;
