-- Delta uploads (DESIGN 13): the diff of a delta reads the current values
-- of the products the delta names (pgstore current_products), to merge the
-- delta's attributes into them. It still writes no product: the apply does.
GRANT SELECT ON products TO catalog_diff;
