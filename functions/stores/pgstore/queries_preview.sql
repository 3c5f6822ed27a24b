-- Dry runs and plans (DESIGN 13; sql/shard/0090_dry_runs.sql). Same
-- "-- name:" blocks as queries.sql.

-- name: insert_dry_run
-- A dry run's slot: a generation like any other, marked dry_run; no other
-- slot is superseded by it.
INSERT INTO generations (retailer_id, generation, format, object_key, upload_expires_at, dry_run)
VALUES ($1, $2, $3, $4, $5, true);

-- name: mark_previewed
-- A dry run read whole ends here, with its counts, the hold a real upload
-- would meet ($3, $4: none when NULL) and its plan ($10 pages computed
-- against applied generation $11). Only a dry run, only from diffing.
UPDATE generations SET state = 'previewed', error_code = $3, error_message = $4, error_line = NULL,
       inserted = $5, updated = $6, deleted = $7, unchanged = $8, products = $9,
       plan_pages = $10, plan_baseline = $11, attribute_names = $12
WHERE retailer_id = $1 AND generation = $2 AND state = 'diffing' AND dry_run;

-- name: record_plan
-- A held generation's plan: $3 pages, computed against applied generation $4.
UPDATE generations SET plan_pages = $3, plan_baseline = $4
WHERE retailer_id = $1 AND generation = $2 AND state IN ('diffing', 'held');

-- name: drop_stale_plan
-- A confirmed generation that applies against another baseline than its
-- plan's: the plan is no longer what it changes, and is dropped (409
-- plan_unavailable).
UPDATE generations SET plan_pages = NULL, plan_baseline = NULL
WHERE retailer_id = $1 AND generation = $2 AND plan_pages IS NOT NULL
  AND plan_baseline IS DISTINCT FROM (SELECT applied_generation FROM retailer_state WHERE retailer_id = $1);

-- name: select_dry_run
SELECT dry_run FROM generations WHERE retailer_id = $1 AND generation = $2;

-- name: record_empty_plan
-- The plan of a generation applied without chunks (it changes nothing):
-- empty, its objects written, against the applied generation of now;
-- recorded in the step that applies it (StartApplying, Counts.EmptyPlan).
UPDATE generations SET plan_pages = 0,
       plan_baseline = (SELECT applied_generation FROM retailer_state WHERE retailer_id = $1)
WHERE retailer_id = $1 AND generation = $2 AND state = 'applying' AND plan_pages IS NULL;

-- name: record_applied_plan
-- An applied generation's plan, recorded once its chunks were sent ($3
-- pages, against applied generation $4); the first one recorded stays.
UPDATE generations SET plan_pages = $3, plan_baseline = $4
WHERE retailer_id = $1 AND generation = $2 AND state IN ('applying', 'applied') AND plan_pages IS NULL;
