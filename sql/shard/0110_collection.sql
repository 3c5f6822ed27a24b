-- Collection: nothing grows for ever (DESIGN 14; docs/RUNBOOK.md,
-- "Retention" and "How to collect").
--
-- write_floor is the retailer-level fence beside the row fence: the oldest
-- generation that may still write to the retailer's catalog. A tombstone
-- (a deleted product's row stamped with the deleting generation) is what
-- keeps a late write of an older generation from bringing the product back
-- (I3); once collection has removed it, the row fence has no row to compare
-- with. So collection raises write_floor, under the fence row FOR UPDATE and
-- in the transaction that deletes tombstones, to a generation at or above
-- every tombstone it deletes, and the chunk write refuses, under the same
-- row FOR KEY SHARE, any generation below it (lock_state_for_chunk). It only
-- rises, and never past the applied generation, so the generation that
-- takes over and a reconciliation repair (at the applied generation) always
-- may write.
ALTER TABLE retailer_state ADD COLUMN write_floor bigint NOT NULL DEFAULT 0;

-- The collection itself is these functions, run by the ops function
-- (functions/stores/pgstore/queries_gc.sql calls them). They are SECURITY
-- DEFINER, owned by the migrating user: the ops role gets no DELETE on any
-- table, only the right to run exactly these rules, each one statement and
-- so one short transaction, each on one retailer and a bounded batch (I12).

-- gc_collect_tombstones: under the retailer's fence row FOR UPDATE (it
-- waits for every chunk transaction in flight, FOR KEY SHARE, and blocks
-- new ones until it commits: none can read a tombstone that this deletes,
-- nor write past a floor it has not seen), raises write_floor to the
-- collection horizon: the newest generation applied before $2 below which
-- nothing is unfinished (no write of an older generation can still be
-- legitimate; the chunk objects and messages of those are gone by then),
-- and never past the applied generation. Then it deletes, among the ids
-- $3, the tombstones stamped at or below the floor, and the consumers'
-- versions of those products (their rows hold the deleting generation
-- only). Returns the floor and how many of each went. $3 empty: only the
-- floor.
CREATE FUNCTION gc_collect_tombstones(retailer text, applied_before timestamptz, ids text[],
                                      OUT floor bigint, OUT tombstones bigint, OUT versions bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    horizon bigint;
    applied bigint;
    consumers text[];
BEGIN
    SELECT s.write_floor, s.applied_generation INTO floor, applied
    FROM retailer_state s WHERE s.retailer_id = retailer FOR UPDATE;
    IF NOT FOUND THEN
        floor := 0; tombstones := 0; versions := 0;
        RETURN;
    END IF;
    SELECT max(g.generation) INTO horizon FROM generations g
    WHERE g.retailer_id = retailer AND g.state = 'applied' AND g.applied_at < applied_before
      AND g.generation <= applied;
    IF horizon IS NOT NULL THEN
        -- Nothing older than the horizon may still be at work.
        horizon := least(horizon, coalesce((SELECT min(u.generation) FROM generations u
            WHERE u.retailer_id = retailer AND u.generation < horizon
              AND u.state IN ('awaiting_upload', 'received', 'diffing', 'applying', 'held')), horizon));
        IF horizon > floor THEN
            UPDATE retailer_state SET write_floor = horizon WHERE retailer_id = retailer;
            floor := horizon;
        END IF;
    END IF;
    WITH d AS (
        DELETE FROM products p
        WHERE p.retailer_id = retailer AND p.product_id = ANY (ids) AND p.deleted AND p.generation <= floor
        RETURNING p.product_id
    )
    SELECT count(*), coalesce(array_agg(d.product_id), '{}') INTO tombstones, ids FROM d;
    versions := 0;
    IF tombstones > 0 THEN
        -- The consumers, by a skip scan of the primary key (a handful).
        WITH RECURSIVE c AS (
            SELECT min(consumer) AS consumer FROM consumer_versions
            UNION ALL
            SELECT (SELECT min(v.consumer) FROM consumer_versions v WHERE v.consumer > c.consumer)
            FROM c WHERE c.consumer IS NOT NULL
        )
        SELECT coalesce(array_agg(consumer), '{}') INTO consumers FROM c WHERE consumer IS NOT NULL;
        WITH d AS (
            DELETE FROM consumer_versions v
            WHERE v.consumer = ANY (consumers) AND v.retailer_id = retailer AND v.product_id = ANY (ids)
              AND v.generation <= floor
            RETURNING 1
        )
        SELECT count(*) INTO versions FROM d;
    END IF;
END $$;

-- gc_collect_chunks: the chunk progress (applied_chunks) of the retailer's
-- finished generations whose state last changed before $2, at most $3
-- rows. A finished generation writes nothing more (its chunks are refused
-- by the fence, and by count_chunk_progress, which needs it applying), so
-- its count has no reader but a replay of its change events, which reads
-- the change objects, gone by then too.
CREATE FUNCTION gc_collect_chunks(retailer text, finished_before timestamptz, max_rows integer)
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH picked AS (
        SELECT c.generation, c.seq FROM applied_chunks c
        JOIN generations g ON g.retailer_id = c.retailer_id AND g.generation = c.generation
        WHERE c.retailer_id = retailer AND g.state IN ('applied', 'superseded', 'rejected', 'expired')
          AND g.state_changed_at < finished_before
        ORDER BY c.generation, c.seq LIMIT max_rows
    ), d AS (
        DELETE FROM applied_chunks c USING picked
        WHERE c.retailer_id = retailer AND c.generation = picked.generation AND c.seq = picked.seq
        RETURNING 1
    )
    SELECT count(*) FROM d;
$$;

-- gc_collect_outbox: the retailer's outbox rows that will never be
-- published: parked (a relay gave up on them, DESIGN 8) before $2 and not
-- redriven since, at most $3. The relay deletes every row it publishes
-- (a redriven one too, once published), so parked rows are all it leaves.
CREATE FUNCTION gc_collect_outbox(retailer text, parked_before timestamptz, max_rows integer)
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH picked AS (
        SELECT id FROM outbox
        WHERE retailer_id = retailer AND parked_at IS NOT NULL AND parked_at < parked_before
        ORDER BY id LIMIT max_rows
    ), d AS (
        DELETE FROM outbox o USING picked WHERE o.id = picked.id RETURNING 1
    )
    SELECT count(*) FROM d;
$$;

REVOKE EXECUTE ON FUNCTION gc_collect_tombstones(text, timestamptz, text[]),
    gc_collect_chunks(text, timestamptz, integer), gc_collect_outbox(text, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gc_collect_tombstones(text, timestamptz, text[]),
    gc_collect_chunks(text, timestamptz, integer), gc_collect_outbox(text, timestamptz, integer) TO catalog_ops;
