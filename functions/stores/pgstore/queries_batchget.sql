-- name: storefront_products_by_id
-- The storefront's batch-get (DESIGN 5): one retailer's live products among
-- the ids of $2 (a text[] of at most 100 distinct ids), each with the
-- 1-based position of its id; absent or deleted ids give no row. One query
-- per request on the retailer's shard, whatever the number of ids.
SELECT k.i, p.attributes, p.generation, p.updated_at
FROM unnest($2::text[]) WITH ORDINALITY AS k(product_id, i)
JOIN products p ON p.retailer_id = $1 AND p.product_id = k.product_id COLLATE "C"
WHERE NOT p.deleted;
