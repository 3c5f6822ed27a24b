-- Per attribute, how many products of the generation's snapshot have it and
-- how many of those have a value other than "" or null
-- ({"name": {"present": n, "valued": m}}), kept with each generation the
-- diff read whole: the next snapshot's attribute_dropped hold compares
-- with the applied baseline's (DESIGN 13). NULL for generations from
-- before: their baseline never holds attribute_dropped.
ALTER TABLE generations ADD COLUMN attribute_counts jsonb;
