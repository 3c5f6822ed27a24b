-- Queries of the attribute_dropped hold (DESIGN 13).

-- name: set_attribute_counts
UPDATE generations SET attribute_counts = $3 WHERE retailer_id = $1 AND generation = $2;

-- name: attribute_counts
SELECT attribute_counts FROM generations WHERE retailer_id = $1 AND generation = $2;

-- name: product_attributes
-- The live rows among the ids $2 (tombstones are not products).
SELECT product_id, attributes FROM products
WHERE retailer_id = $1 AND product_id = ANY($2::text[]) AND NOT deleted;
