-- The apply stages each chunk in a temporary table of its session
-- (functions/stores/pgstore/chunkwrite.go: binary COPY into apply_stage, then one
-- set-based statement per kind of write). Temporary tables need TEMPORARY
-- on the database, which 0050 revoked from PUBLIC: the apply role gets it
-- back, on the shards only. A temporary table is private to its session,
-- writes no WAL and goes with the session; it gives no way to touch the
-- catalog beyond the apply's own grants.
DO $$
BEGIN
    EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO catalog_apply', current_database());
END $$;
