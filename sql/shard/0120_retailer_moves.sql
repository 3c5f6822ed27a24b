-- Moving a retailer between shards (DESIGN 14; docs/ARCHITECTURE.md "Moving
-- a retailer between shards"). The move itself runs in the ops function
-- (functions/stores/pgstore/move.go); these are the shard's side of it.
--
-- shard_moves is a shard's record of a move of a retailer in or out:
--   source copying   the catalog is being copied out; writes go on, and the
--                    products and consumer versions they touch are logged
--                    (move_changes) to be copied again;
--   source frozen    the copy is being finished: every write of the
--                    retailer waits (up to 3 s) and is then refused (SQLSTATE
--                    CM001, retried by the pipeline) until the move lets the
--                    target take them;
--   source moved     the retailer lives on the other shard: its rows here
--                    are removed, and a late writer that still routes here
--                    is refused (the forwarding address, kept: the only row
--                    of the retailer the old shard keeps);
--   target incoming  the copy is arriving: only the move writes.
CREATE TABLE shard_moves (
    retailer_id text PRIMARY KEY,
    move_id     text NOT NULL,
    role        text NOT NULL CHECK (role IN ('source', 'target')),
    state       text NOT NULL CHECK (state IN ('copying', 'frozen', 'moved', 'incoming')),
    other_shard integer NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((role = 'target') = (state = 'incoming'))
);

-- What changed while the source copied: one row per write (consumer '' for
-- products, the consumer's name for consumer_versions), read in seq order.
CREATE TABLE move_changes (
    seq         bigserial PRIMARY KEY,
    retailer_id text NOT NULL,
    consumer    text NOT NULL,
    product_id  text COLLATE "C" NOT NULL
);
CREATE INDEX move_changes_retailer ON move_changes (retailer_id, seq);

-- move_guard runs before every row write of a retailer's tables. The move's
-- own transactions set catalog.move (SET LOCAL) and pass: the triggers'
-- WHEN clause is false for them, so the move's COPY calls no PL/pgSQL a row
-- (the function's own first test stays for a trigger made without it). Every other
-- writer takes the retailer's move lock shared (held to its commit), so the
-- move, taking it exclusively to start the log or to freeze, waits for the
-- writes in flight and every later one sees the new state.
CREATE FUNCTION move_guard() RETURNS trigger LANGUAGE plpgsql AS $$
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
    IF st IS NOT NULL THEN
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

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['products', 'consumer_versions', 'retailer_state', 'generations', 'applied_chunks',
                             'generation_redrives', 'generation_repairs', 'usage_daily'] LOOP
        EXECUTE format('CREATE TRIGGER move_guard BEFORE INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW
                        WHEN (coalesce(current_setting(''catalog.move'', true), '''') = '''')
                        EXECUTE FUNCTION move_guard()', t);
    END LOOP;
END $$;
-- The outbox: a new event only comes with a guarded write; the relay's
-- claims, parks and deletes go on (an event published twice around the
-- move is one the consumers have seen: DESIGN 8's at least once).
CREATE TRIGGER move_guard BEFORE INSERT ON outbox FOR EACH ROW
    WHEN (coalesce(current_setting('catalog.move', true), '') = '')
    EXECUTE FUNCTION move_guard();

-- The move copies generations with their states: no lifecycle event again.
CREATE OR REPLACE FUNCTION generation_lifecycle_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('catalog.move', true), '') <> '' THEN
        RETURN NULL;
    END IF;
    INSERT INTO outbox (event_type, retailer_id, generation, status, event_time)
    VALUES ('catalog.snapshot.' || NEW.state, NEW.retailer_id, NEW.generation, to_jsonb(NEW), NEW.state_changed_at);
    RETURN NULL;
END $$;

-- The ops function runs the move: it copies (INSERT) and removes (DELETE)
-- every row of a retailer on both shards, and changes only the move's
-- record (UPDATE: the rows it copies keep their values).
GRANT SELECT, INSERT, DELETE ON shard_moves, move_changes, retailer_state, generations, products,
    applied_chunks, outbox, consumer_versions, generation_redrives, generation_repairs, usage_daily TO catalog_ops;
GRANT UPDATE ON shard_moves TO catalog_ops;
GRANT USAGE ON SEQUENCE move_changes_seq_seq, outbox_id_seq TO catalog_ops;
-- Every writer of a guarded table logs through the guard.
GRANT INSERT ON move_changes TO catalog_upload, catalog_diff, catalog_apply, catalog_relay, catalog_consumers;
GRANT SELECT ON shard_moves TO catalog_upload, catalog_diff, catalog_apply, catalog_relay, catalog_consumers;
GRANT USAGE ON SEQUENCE move_changes_seq_seq TO catalog_upload, catalog_diff, catalog_apply, catalog_relay, catalog_consumers;
