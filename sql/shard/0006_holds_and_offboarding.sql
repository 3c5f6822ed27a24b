-- The snapshot's attribute names (the union over its products, sorted),
-- kept with each generation the diff read whole: the next snapshot's
-- mass_update hold compares its names with the applied baseline's. NULL for
-- generations from before (their baseline never holds for a rename).
ALTER TABLE generations ADD COLUMN attribute_names text[];
-- The generation an offboarding reserved: an empty snapshot, confirmed in
-- advance, that removes the retailer's catalog through the pipeline (the
-- fence stops every older generation). At most one per retailer.
ALTER TABLE generations ADD COLUMN offboarding boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX generations_offboarding ON generations (retailer_id) WHERE offboarding;
