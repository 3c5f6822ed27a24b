-- Offboarding is final, decided on the shard (DESIGN 5; I12: a state check
-- and the state change it guards happen in one transaction; see
-- docs/ARCHITECTURE.md, "Holds, tokens and offboarding").
--
-- The registry (control database) and a shard are different databases: a
-- reservation checked against the registry ("not offboarded") and then made
-- on the shard could come after the offboarding's reservation, supersede it
-- and keep the catalog alive. So the shard records the offboarding in the
-- retailer's fence row, in the transaction that reserves the offboarding
-- generation (Shard.ReserveOffboarding, holding the row FOR UPDATE), and
-- every path that could change the retailer's catalog checks it in its own
-- transaction, under a lock on that row that conflicts with FOR UPDATE:
-- reservations and confirmations (FOR NO KEY UPDATE: 409
-- retailer_offboarded), arrivals (FOR KEY SHARE: an older slot's upload ends
-- superseded by the offboarding), diffs (FOR UPDATE), applies (FOR KEY
-- SHARE: the fence refuses their chunks), undoes (undo_needed: never one).
ALTER TABLE retailer_state ADD COLUMN offboarding_generation bigint;

-- Retailers offboarded before this migration whose offboarding generation
-- was not beaten by a later reservation (the defect this fixes): the shard
-- learns it now, with the fence raised and older work stopped, as
-- ReserveOffboarding does. One that was beaten is recorded by the next
-- DELETE of the retailer, with a new offboarding generation
-- (docs/RUNBOOK.md, "Offboarding a retailer").
UPDATE retailer_state s
SET offboarding_generation = g.generation, latest_generation = greatest(s.latest_generation, g.generation)
FROM generations g
WHERE g.retailer_id = s.retailer_id AND g.offboarding AND g.state <> 'superseded'
  AND NOT EXISTS (SELECT 1 FROM generations n WHERE n.retailer_id = g.retailer_id AND n.generation > g.generation);
UPDATE generations g
SET state = 'superseded', superseded_by = s.offboarding_generation
FROM retailer_state s
WHERE s.retailer_id = g.retailer_id AND g.generation < s.offboarding_generation
  AND g.state IN ('awaiting_upload', 'received', 'diffing', 'applying', 'held');

-- Recording the offboarding raises the fence to the offboarding generation
-- in the same statement: from its commit no chunk of an older generation
-- writes (I2, I4). The upload function, which offboards, may set this
-- column only: the trigger is how it raises the fence, and only to the
-- retailer's offboarding generation (its role has no UPDATE on
-- latest_generation). Once recorded it never changes: offboarding is final.
CREATE FUNCTION retailer_offboarded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.offboarding_generation IS NOT NULL THEN
        IF NEW.offboarding_generation IS DISTINCT FROM OLD.offboarding_generation THEN
            RAISE EXCEPTION 'retailer % was offboarded by generation %: that is final',
                OLD.retailer_id, OLD.offboarding_generation;
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.offboarding_generation IS NOT NULL THEN
        IF NOT EXISTS (SELECT 1 FROM generations WHERE retailer_id = NEW.retailer_id
                                                   AND generation = NEW.offboarding_generation AND offboarding) THEN
            RAISE EXCEPTION 'generation % is not the offboarding generation of retailer %',
                NEW.offboarding_generation, NEW.retailer_id;
        END IF;
        NEW.latest_generation := greatest(NEW.latest_generation, NEW.offboarding_generation);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER retailer_offboarded BEFORE UPDATE OF offboarding_generation ON retailer_state
    FOR EACH ROW EXECUTE FUNCTION retailer_offboarded();

-- A backstop under the checks of the code: no generation is reserved for a
-- retailer after its offboarding (a reservation, an undo), whatever path
-- reserves it. The callers check first, under the fence row, and answer
-- 409 retailer_offboarded or reserve nothing; this only turns a bug into an
-- error instead of a catalog brought back.
CREATE FUNCTION generation_after_offboarding() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT NEW.offboarding AND EXISTS (SELECT 1 FROM retailer_state WHERE retailer_id = NEW.retailer_id
                                                                      AND offboarding_generation IS NOT NULL) THEN
        RAISE EXCEPTION 'retailer % is offboarded: no generation is reserved after its offboarding', NEW.retailer_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER generation_after_offboarding BEFORE INSERT ON generations
    FOR EACH ROW EXECUTE FUNCTION generation_after_offboarding();

GRANT UPDATE (offboarding_generation) ON retailer_state TO catalog_upload;
