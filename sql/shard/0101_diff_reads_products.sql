-- The attribute_dropped hold's blank rule compares, when the counts alone
-- cannot clear it, the old values of the products an upload updates or
-- deletes with the new ones: the diff reads those rows' attributes (the
-- columns it needs, never a write, never the hashes or stamps).
GRANT SELECT (retailer_id, product_id, attributes, deleted) ON products TO catalog_diff;
