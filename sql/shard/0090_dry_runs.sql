-- Dry runs and plans (DESIGN 13).
--
-- dry_run: a generation reserved with {"dry_run": true}. Its upload is
-- read and diffed against the catalog as it is when the file arrives, and
-- nothing is written: it ends `previewed` (a final state) or `rejected`.
-- A preview never raises the fence, never supersedes and is never
-- superseded, never holds or blocks a real generation (the statements that
-- ask "is there a newer generation, or arrival" pass it over), and emits
-- no lifecycle event (the triggers below skip it).
-- plan_pages: the generation's plan was written under plans/{id}/{gen}/
-- (keys.PlanIndex, keys.PlanPage) in this many pages (NULL: no plan);
-- plan_baseline: the applied generation it was computed against (the plan
-- of a held upload stays what its confirmation changes only while the
-- baseline is that one).
ALTER TABLE generations
    ADD COLUMN dry_run boolean NOT NULL DEFAULT false,
    ADD COLUMN plan_pages integer,
    ADD COLUMN plan_baseline bigint;

ALTER TABLE generations DROP CONSTRAINT generations_state_check;
ALTER TABLE generations ADD CONSTRAINT generations_state_check
    CHECK (state IN ('awaiting_upload','received','diffing','applying','applied','superseded','rejected','held','expired','previewed'));
ALTER TABLE generations ADD CONSTRAINT generations_previewed_dry_run
    CHECK (state <> 'previewed' OR dry_run);

DROP TRIGGER generation_lifecycle_event ON generations;
DROP TRIGGER generation_lifecycle_event_insert ON generations;
CREATE TRIGGER generation_lifecycle_event AFTER UPDATE OF state ON generations
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state AND NOT NEW.dry_run
                       AND NEW.state IN ('applied', 'rejected', 'held', 'superseded'))
    EXECUTE FUNCTION generation_lifecycle_event();
CREATE TRIGGER generation_lifecycle_event_insert AFTER INSERT ON generations
    FOR EACH ROW WHEN (NOT NEW.dry_run AND NEW.state IN ('applied', 'rejected', 'held', 'superseded'))
    EXECUTE FUNCTION generation_lifecycle_event();

-- The diff reads the catalog's current values of the ids a plan changes
-- (its "from"), by the primary key.
GRANT SELECT (retailer_id, product_id, attributes, deleted) ON products TO catalog_diff;
