-- name: storefront_products_by_id
-- The storefront's batch-get (DESIGN 5): one retailer's live products among
-- the ids of $2 (a text[] of at most 100 distinct ids), each with the
-- 1-based position of its id; absent or deleted ids give no row. One query
-- per request on the retailer's shard, whatever the number of ids.
-- A primary-key probe an id (LATERAL ... LIMIT 1 is not flattened into a
-- join): on a retailer's rows never analyzed, as after its first load, a
-- join was planned as a scan of all of them (TestKeyLookupsProbeByKey).
SELECT k.i, p.attributes, p.generation, p.updated_at
FROM unnest($2::text[]) WITH ORDINALITY AS k(product_id, i)
CROSS JOIN LATERAL (SELECT attributes, generation, updated_at FROM products
                    WHERE retailer_id = $1 AND product_id = k.product_id COLLATE "C" AND NOT deleted LIMIT 1) AS p;
