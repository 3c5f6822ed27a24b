-- The move's guard once a transaction and retailer instead of once a row
-- (docs/PERFORMANCE.md, "Apply"). move_guard (0120) took the retailer's
-- move lock shared and read its shard_moves record for every row written:
-- a PL/pgSQL call, a lock and a query a row, which halved a first load's
-- rate (0.96 -> 0.52 of COPY). The lock is held to the transaction's end,
-- and the move takes it exclusively for each change of state that matters
-- to a writer (starting the log, freezing), so what the first row of a
-- transaction found stays true for the rest of it. When it found no move,
-- the guard records the retailer in catalog.move_free (set_config, local
-- to the transaction: a rolled-back savepoint takes it back with its rows),
-- and the triggers' WHEN clause lets the transaction's later rows of that
-- retailer pass without calling it. While the retailer's catalog is being
-- copied (copying) every row still calls it, to be logged; frozen, moved
-- and incoming refuse as before.

CREATE OR REPLACE FUNCTION move_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rid   text;
    st    text;
    pid   text;
    cons  text := '';
BEGIN
    IF coalesce(current_setting('catalog.move', true), '') <> '' THEN
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'DELETE' THEN rid := OLD.retailer_id; ELSE rid := NEW.retailer_id; END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('catalog.move:' || rid, 0));
    SELECT m.state INTO st FROM shard_moves m WHERE m.retailer_id = rid;
    -- Held back while the move switches (frozen, incoming): the writer
    -- waits up to 3 s for the switch to end (the target's record goes: the
    -- write goes on there; the source's record is moved: it is refused and
    -- tried again through the new route), so that a queue's message does
    -- not spend its receives on the few seconds of a switch.
    FOR i IN 1..30 LOOP
        EXIT WHEN st IS NULL OR st NOT IN ('frozen', 'incoming');
        PERFORM pg_sleep(0.1);
        st := NULL;
        SELECT m.state INTO st FROM shard_moves m WHERE m.retailer_id = rid;
    END LOOP;
    IF st IS NULL THEN
        -- No move of the retailer, and none can start before this
        -- transaction ends (it holds the move lock shared): its later rows
        -- of the retailer skip the guard (the triggers' WHEN clause).
        PERFORM set_config('catalog.move_free', rid, true);
    ELSE
        IF st <> 'copying' THEN
            RAISE EXCEPTION 'retailer % is moving between shards (%): try again shortly', rid, st
                USING ERRCODE = 'CM001';
        END IF;
        IF TG_TABLE_NAME = 'products' THEN
            IF TG_OP = 'DELETE' THEN pid := OLD.product_id; ELSE pid := NEW.product_id; END IF;
            INSERT INTO move_changes (retailer_id, consumer, product_id) VALUES (rid, '', pid);
        ELSIF TG_TABLE_NAME = 'consumer_versions' THEN
            IF TG_OP = 'DELETE' THEN pid := OLD.product_id; cons := OLD.consumer;
            ELSE pid := NEW.product_id; cons := NEW.consumer; END IF;
            INSERT INTO move_changes (retailer_id, consumer, product_id) VALUES (rid, cons, pid);
        END IF;
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END $$;

-- The triggers again, split by event: a DELETE's WHEN clause reads OLD,
-- the others' NEW.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['products', 'consumer_versions', 'retailer_state', 'generations', 'applied_chunks',
                             'generation_redrives', 'generation_repairs', 'usage_daily'] LOOP
        EXECUTE format('DROP TRIGGER move_guard ON %I', t);
        EXECUTE format('CREATE TRIGGER move_guard BEFORE INSERT OR UPDATE ON %I FOR EACH ROW
                        WHEN (coalesce(current_setting(''catalog.move'', true), '''') = ''''
                              AND current_setting(''catalog.move_free'', true) IS DISTINCT FROM NEW.retailer_id)
                        EXECUTE FUNCTION move_guard()', t);
        EXECUTE format('CREATE TRIGGER move_guard_delete BEFORE DELETE ON %I FOR EACH ROW
                        WHEN (coalesce(current_setting(''catalog.move'', true), '''') = ''''
                              AND current_setting(''catalog.move_free'', true) IS DISTINCT FROM OLD.retailer_id)
                        EXECUTE FUNCTION move_guard()', t);
    END LOOP;
END $$;
DROP TRIGGER move_guard ON outbox;
CREATE TRIGGER move_guard BEFORE INSERT ON outbox FOR EACH ROW
    WHEN (coalesce(current_setting('catalog.move', true), '') = ''
          AND current_setting('catalog.move_free', true) IS DISTINCT FROM NEW.retailer_id)
    EXECUTE FUNCTION move_guard();
