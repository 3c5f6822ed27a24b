-- Queries of delta uploads and of materialized catalogs (DESIGN 13). Same
-- "-- name:" blocks as queries.sql.

-- name: insert_delta_generation
-- A delta upload's slot: mode delta, awaiting its upload.
INSERT INTO generations (retailer_id, generation, format, object_key, upload_expires_at, mode)
VALUES ($1, $2, $3, $4, $5, 'delta');

-- name: generation_mode
-- Where a generation's content comes from: its mode and, for a rollback,
-- its source generation (0 otherwise, or the empty catalog).
SELECT mode, coalesce(source_generation, 0) FROM generations WHERE retailer_id = $1 AND generation = $2;

-- name: older_unfinished
-- The newest generation older than $2 that is not final (a held one
-- included): a delta waits for it (0: none). A dry run blocks nothing.
SELECT coalesce(max(generation), 0) FROM generations
WHERE retailer_id = $1 AND generation < $2 AND state IN ('received', 'diffing', 'applying', 'held') AND NOT dry_run;

-- name: waiting_delta
-- The oldest delta received and waiting whose older generations are all
-- final now (a dry run blocks nothing): its diff may start (0: none).
SELECT coalesce(min(g.generation), 0) FROM generations g
WHERE g.retailer_id = $1 AND g.mode = 'delta' AND g.state = 'received' AND NOT g.dry_run
  AND NOT EXISTS (SELECT 1 FROM generations o WHERE o.retailer_id = g.retailer_id AND o.generation < g.generation
                                               AND o.state IN ('received', 'diffing', 'applying', 'held') AND NOT o.dry_run);

-- name: chain_link
-- One generation of the chain that makes a generation's catalog.
SELECT mode, format, object_key, coalesce(object_etag, ''), coalesce(source_generation, 0), offboarding
FROM generations WHERE retailer_id = $1 AND generation = $2;

-- name: applied_before
-- The newest applied generation older than $2 (0: none): the catalog a
-- delta was applied on top of (a delta waits for every older generation
-- to be final, so at its take-over this was the applied baseline).
SELECT coalesce(max(generation), 0) FROM generations
WHERE retailer_id = $1 AND generation < $2 AND state = 'applied';

-- name: current_products
-- The live products among $2 (ids), with their canonical-comparable
-- attributes and content hash: what a delta's diff merges into.
-- A primary-key probe an id (as storefront_products_by_id).
SELECT p.product_id, p.attributes::text, p.content_hash
FROM unnest($2::text[]) AS k(product_id)
CROSS JOIN LATERAL (SELECT product_id, attributes, content_hash FROM products
                    WHERE retailer_id = $1 AND product_id = k.product_id COLLATE "C" AND NOT deleted LIMIT 1) AS p;
