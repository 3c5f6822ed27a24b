-- The attribute_dropped threshold (PUT /v1/retailers/{id}/settings
-- hold_drop_pct): an upload that blanks ("" or null) an attribute in more
-- than this fraction of the products that had a value, of a catalog of at
-- least hold_min_products products, is held (DESIGN 13).
ALTER TABLE retailers ADD COLUMN hold_drop_fraction double precision NOT NULL DEFAULT 0.5
    CHECK (hold_drop_fraction >= 0 AND hold_drop_fraction <= 1);
