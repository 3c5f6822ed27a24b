-- Queries of the ops function (functions/ops): why, the stuck-generation
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
