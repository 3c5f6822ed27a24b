-- Per-retailer hold thresholds (PUT /v1/retailers/{id}/settings): a
-- snapshot whose attribute names differ from the baseline's and that would
-- update more than this fraction of a catalog of at least hold_min_products
-- products is held (mass_update), as hold_delete_fraction holds deletes.
ALTER TABLE retailers ADD COLUMN hold_update_fraction double precision NOT NULL DEFAULT 0.5;
-- Offboarding (DELETE /v1/admin/retailers/{id}): the token is revoked (its
-- hash replaced by one nobody holds) and nothing new is accepted; the row
-- stays, so that the pipeline can remove the catalog and the id is not
-- taken again by mistake.
ALTER TABLE retailers ADD COLUMN offboarded_at timestamptz;
