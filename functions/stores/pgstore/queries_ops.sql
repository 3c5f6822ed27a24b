-- Queries of the ops function (functions/operate/ops): why, the stuck-generation
-- sweeper and reconciliation. Same "-- name:" blocks as queries.sql.

-- name: generation_progress
-- What a generation has done beyond its status: when its state last
-- changed, its chunks applied (the newest one's time), and the sweeper's
-- re-drives of it.
SELECT g.state_changed_at,
       (SELECT max(c.applied_at) FROM applied_chunks c WHERE c.retailer_id = $1 AND c.generation = $2),
       coalesce((SELECT array_agg(c.seq ORDER BY c.seq) FROM applied_chunks c WHERE c.retailer_id = $1 AND c.generation = $2), '{}'),
       coalesce(r.redrives, 0), r.last_redrive_at
FROM generations g
LEFT JOIN generation_redrives r ON r.retailer_id = g.retailer_id AND r.generation = g.generation
WHERE g.retailer_id = $1 AND g.generation = $2;

-- name: catalog_row
-- A product's row on the writer, tombstone included.
SELECT attributes, generation, deleted, updated_at
FROM products WHERE retailer_id = $1 AND product_id = $2;

-- name: retailer_ids
-- The registry in id order, a page after $1.
SELECT retailer_id FROM retailers WHERE retailer_id > $1 ORDER BY retailer_id LIMIT $2;

-- name: reconcile_run_create
INSERT INTO reconcile_runs (run_id, retailer_id, repair, scheduled, total)
VALUES ($1, nullif($2, ''), $3, $4, $5);

-- name: reconcile_run_total
-- A run of every retailer learns its total when its listing ends.
UPDATE reconcile_runs SET total = $2 WHERE run_id = $1;

-- name: reconcile_run_lock
-- Results of one run are recorded one at a time, so that the last one
-- sees every other and finishes the run.
SELECT total FROM reconcile_runs WHERE run_id = $1 FOR UPDATE;

-- name: reconcile_result_upsert
-- A retailer's result; a retried check overwrites its own.
INSERT INTO reconcile_results AS r (run_id, retailer_id, generation, checked_at, products, rows_live,
    missing, extra, different, repaired, unrepaired, examples, skipped, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, nullif($13, ''), nullif($14, ''))
ON CONFLICT (run_id, retailer_id) DO UPDATE
SET generation = EXCLUDED.generation, checked_at = EXCLUDED.checked_at, products = EXCLUDED.products,
    rows_live = EXCLUDED.rows_live, missing = EXCLUDED.missing, extra = EXCLUDED.extra,
    different = EXCLUDED.different, repaired = EXCLUDED.repaired, unrepaired = EXCLUDED.unrepaired,
    examples = EXCLUDED.examples, skipped = EXCLUDED.skipped, error = EXCLUDED.error;

-- name: reconcile_run_finish
-- Done when every retailer has a result (a run whose total is not known yet is not).
UPDATE reconcile_runs SET finished_at = now()
WHERE run_id = $1 AND finished_at IS NULL AND total > 0
  AND (SELECT count(*) FROM reconcile_results WHERE run_id = $1) >= total;

-- name: reconcile_run
SELECT run_id, coalesce(retailer_id, ''), repair, scheduled, requested_at, total, finished_at
FROM reconcile_runs WHERE run_id = $1;

-- name: reconcile_counts
-- How many retailers have a result, were checked, and diverged.
SELECT count(*), count(*) FILTER (WHERE skipped IS NULL AND error IS NULL),
       count(*) FILTER (WHERE missing + extra + different > 0)
FROM reconcile_results WHERE run_id = $1;

-- name: reconcile_notable
-- The results worth listing: divergent, skipped or failed, in retailer order.
SELECT retailer_id, generation, checked_at, products, rows_live, missing, extra, different, repaired,
       unrepaired, examples, coalesce(skipped, ''), coalesce(error, '')
FROM reconcile_results
WHERE run_id = $1 AND (missing + extra + different > 0 OR skipped IS NOT NULL OR error IS NOT NULL)
ORDER BY retailer_id LIMIT $2;

-- name: reconcile_runs_prune
DELETE FROM reconcile_runs WHERE requested_at < $1;

-- name: catalog_scan
-- Reconciliation's walk: the retailer's live rows from product_id $2 on,
-- in product_id byte order (the primary key's order), their attributes as
-- the database holds them.
SELECT product_id, attributes FROM products
WHERE retailer_id = $1 AND NOT deleted AND product_id >= $2 ORDER BY product_id;

-- name: catalog_scan_range
-- The same, for product ids in [$2, $3): one part of a walk in parts.
SELECT product_id, attributes FROM products
WHERE retailer_id = $1 AND NOT deleted AND product_id >= $2 AND product_id < $3 ORDER BY product_id;

-- name: catalog_scan_hashes
-- The bench's reference for the walk: the same rows, their stored hashes only.
SELECT product_id, content_hash FROM products
WHERE retailer_id = $1 AND NOT deleted ORDER BY product_id;

-- name: normalize_attributes
-- JSON objects as the database stores them (jsonb: numbers as numeric,
-- keys and whitespace its own), in the order given.
SELECT (u.a::jsonb)::text FROM unnest($1::text[]) WITH ORDINALITY AS u(a, i) ORDER BY u.i;

-- name: walk_without_timeout
-- The walk of a large catalog takes its time: no statement timeout for
-- this transaction.
SET LOCAL statement_timeout = 0;

-- name: lock_state_for_repair
-- A repair writes like an apply, under the fence row FOR KEY SHARE, and
-- only while the generation it repairs is the latest and the applied one.
SELECT latest_generation, applied_generation FROM retailer_state WHERE retailer_id = $1 FOR KEY SHARE;

-- name: repair_seq
-- The number of a generation's next repair event: after its chunks.
WITH n AS (
    INSERT INTO generation_repairs AS r (retailer_id, generation, repairs, last_repair_at)
    VALUES ($1, $2, 1, now())
    ON CONFLICT (retailer_id, generation) DO UPDATE SET repairs = r.repairs + 1, last_repair_at = now()
    RETURNING repairs
)
SELECT g.chunks_total + n.repairs - 1 FROM n, generations g WHERE g.retailer_id = $1 AND g.generation = $2;

-- name: repair_upsert
-- Reconciliation's repair of rows that differ from the applied snapshot or
-- are missing: written with the applied generation $2, fenced like any
-- apply (a row of a newer generation is never touched) but also over a
-- row stamped with $2 itself (changed behind the pipeline's back), and only
-- where the row still differs. Run under stage_plans; the fenced ids found
-- by a primary-key probe an id (TestKeyLookupsProbeByKey).
WITH input AS (
    SELECT u.product_id, u.attributes::jsonb AS attributes, u.content_hash
    FROM unnest($3::text[], $4::text[], $5::bytea[]) AS u(product_id, attributes, content_hash)
), up AS (
    INSERT INTO products AS p (retailer_id, product_id, attributes, content_hash, generation, deleted, updated_at)
    SELECT $1, product_id, attributes, content_hash, $2, false, now() FROM input
    ON CONFLICT (retailer_id, product_id) DO UPDATE
    SET attributes = EXCLUDED.attributes, content_hash = EXCLUDED.content_hash,
        generation = EXCLUDED.generation, deleted = false, updated_at = EXCLUDED.updated_at
    WHERE p.generation <= EXCLUDED.generation
      AND (p.deleted OR p.attributes IS DISTINCT FROM EXCLUDED.attributes OR p.content_hash IS DISTINCT FROM EXCLUDED.content_hash)
    RETURNING p.product_id
)
SELECT (SELECT count(*) FROM up),
       ARRAY(SELECT product_id COLLATE "C" FROM input EXCEPT SELECT product_id FROM up),
       ARRAY(SELECT f.product_id COLLATE "C" FROM unnest($3::text[]) AS k(product_id)
             CROSS JOIN LATERAL (SELECT product_id FROM products
                                 WHERE retailer_id = $1 AND product_id = k.product_id COLLATE "C" AND generation > $2 LIMIT 1) AS f);

-- name: repair_delete
-- Reconciliation's tombstones for rows the applied snapshot does not have,
-- stamped with $2 and fenced likewise. (On a catalog never analyzed the
-- UPDATE's "= ANY" is an index scan of the retailer's rows filtered, even
-- under stage_plans: a rare path, only divergent rows; the fenced ids are
-- probed.)
WITH del AS (
    UPDATE products SET deleted = true, attributes = NULL, content_hash = NULL, generation = $2, updated_at = now()
    WHERE retailer_id = $1 AND product_id = ANY($3::text[]) AND generation <= $2 AND NOT deleted
    RETURNING product_id
)
SELECT (SELECT count(*) FROM del),
       ARRAY(SELECT u COLLATE "C" FROM unnest($3::text[]) AS u EXCEPT SELECT product_id FROM del),
       ARRAY(SELECT f.product_id COLLATE "C" FROM unnest($3::text[]) AS k(product_id)
             CROSS JOIN LATERAL (SELECT product_id FROM products
                                 WHERE retailer_id = $1 AND product_id = k.product_id COLLATE "C" AND generation > $2 LIMIT 1) AS f);

-- name: directory_repair
-- The product directory after a repair: like directory_apply, and over an
-- entry of the repair's own generation too.
INSERT INTO product_directory AS d (product_id, retailer_id, generation, deleted)
SELECT u.product_id, $1, $2, u.deleted
FROM unnest($3::text[], $4::boolean[]) AS u(product_id, deleted)
ON CONFLICT (product_id, retailer_id) DO UPDATE
SET generation = EXCLUDED.generation, deleted = EXCLUDED.deleted, updated_at = now()
WHERE d.generation <= EXCLUDED.generation AND d.deleted IS DISTINCT FROM EXCLUDED.deleted;

-- name: stalled_generations
-- Generations with work left (received, diffing, applying, a confirmed
-- hold) whose last progress (a state change, a chunk applied, a re-drive)
-- is older than $1, oldest first, at most $2; and an undo (I10) still
-- received a minute after it was reserved (its diff job was lost).
SELECT g.retailer_id, g.generation, g.state, g.confirmed, g.chunks_total, g.inserted + g.updated + g.deleted,
       coalesce(r.redrives, 0), p.moved
FROM generations g
LEFT JOIN generation_redrives r ON r.retailer_id = g.retailer_id AND r.generation = g.generation
CROSS JOIN LATERAL (
    SELECT greatest(g.state_changed_at, r.last_redrive_at,
                    (SELECT max(c.applied_at) FROM applied_chunks c
                     WHERE c.retailer_id = g.retailer_id AND c.generation = g.generation)) AS moved
) p
WHERE g.state IN ('received', 'diffing', 'applying', 'held')
  AND (g.state <> 'held' OR g.confirmed)
  AND ((g.state_changed_at < $1 AND p.moved < $1)
       OR (g.undoes IS NOT NULL AND g.state = 'received' AND p.moved < now() - interval '1 minute'))
  -- A delta waiting for an older generation is not stalled (DESIGN 13):
  -- the older one is, if anything; once it ends the delta is re-driven.
  -- A delta's dry run waits for nothing: received, it is re-driven.
  AND NOT (g.mode = 'delta' AND g.state = 'received' AND NOT g.dry_run
           AND EXISTS (SELECT 1 FROM generations o WHERE o.retailer_id = g.retailer_id AND o.generation < g.generation
                                                    AND o.state IN ('received', 'diffing', 'applying', 'held') AND NOT o.dry_run))
ORDER BY p.moved LIMIT $2;

-- name: record_redrive
-- The sweeper re-drove a generation: one more, now, and what it did.
INSERT INTO generation_redrives AS r (retailer_id, generation, redrives, last_redrive_at, last_action)
VALUES ($1, $2, 1, now(), $3)
ON CONFLICT (retailer_id, generation) DO UPDATE
SET redrives = r.redrives + 1, last_redrive_at = now(), last_action = EXCLUDED.last_action
RETURNING redrives;
