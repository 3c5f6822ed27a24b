-- Queries of the attribute_dropped hold (DESIGN 13).

-- name: set_attribute_counts
UPDATE generations SET attribute_counts = $3 WHERE retailer_id = $1 AND generation = $2;

-- name: attribute_counts
SELECT attribute_counts FROM generations WHERE retailer_id = $1 AND generation = $2;

-- name: product_attributes
-- The live rows among the ids $2 (tombstones are not products). A
-- primary-key probe an id (as storefront_products_by_id): "product_id =
-- ANY($2)" was planned, on a catalog never analyzed (a change right after
-- a first load), as a bitmap scan of every row of the retailer filtered
-- against the 1,000 ids, 0.2 s a call on 1M products: it made the applied
-- plan of a 4% change cost 5 s of its 9 (TestKeyLookupsProbeByKey).
SELECT p.product_id, p.attributes
FROM unnest($2::text[]) AS k(product_id)
CROSS JOIN LATERAL (SELECT product_id, attributes FROM products
                    WHERE retailer_id = $1 AND product_id = k.product_id COLLATE "C" AND NOT deleted LIMIT 1) AS p;
