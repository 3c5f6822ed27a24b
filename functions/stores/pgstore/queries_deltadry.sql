-- Dry runs of delta uploads (DESIGN 13; sql/shard/0090_dry_runs.sql and
-- 0095_delta_uploads.sql). Same "-- name:" blocks as queries.sql.

-- name: insert_delta_dry_run
-- A delta's dry run: a slot like any dry run's (no other slot is
-- superseded by it), of mode delta. Every statement that asks for an older
-- generation in progress, a waiting delta or a newer arrival passes it
-- over (NOT dry_run): it waits for nothing and nothing waits for it.
INSERT INTO generations (retailer_id, generation, format, object_key, upload_expires_at, mode, dry_run)
VALUES ($1, $2, $3, $4, $5, 'delta', true);
