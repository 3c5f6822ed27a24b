-- The attribute_dropped hold's blank rule compares, when the counts alone
-- cannot clear it, the old values of the products an upload updates or
-- deletes with the new ones: the diff reads those rows (never writes them).
GRANT SELECT ON products TO catalog_diff;
