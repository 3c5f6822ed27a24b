-- Queries of the control and shard stores, one "-- name:" block each.

-- name: create_retailer
INSERT INTO retailers (retailer_id, shard, token_hash)
VALUES ($1, $2, $3)
ON CONFLICT (retailer_id) DO NOTHING;

-- name: get_retailer
SELECT retailer_id, shard, token_hash, hold_delete_fraction, hold_update_fraction, hold_min_products,
       created_at, offboarded_at, hold_drop_fraction
FROM retailers WHERE retailer_id = $1;

-- name: set_hold_policy
UPDATE retailers SET hold_delete_fraction = $2, hold_update_fraction = $3, hold_drop_fraction = $4
WHERE retailer_id = $1 AND offboarded_at IS NULL;

-- name: set_token
-- A new token ($3) in place of the one it replaces ($2), compared and
-- swapped in this one statement: the old one stops working with this
-- commit, and of two concurrent rotations of the same token one changes
-- the row and the other finds $2 gone and changes nothing.
UPDATE retailers SET token_hash = $3
WHERE retailer_id = $1 AND token_hash = $2 AND offboarded_at IS NULL;

-- name: offboard_retailer
-- The token is revoked at once ($2 is the hash of a token nobody holds);
-- offboarding again changes nothing (the first time and revoked hash stay).
UPDATE retailers SET token_hash = CASE WHEN offboarded_at IS NULL THEN $2 ELSE token_hash END,
                     offboarded_at = coalesce(offboarded_at, now())
WHERE retailer_id = $1
RETURNING offboarded_at;

-- name: retailer_shard
-- The storefront's routing: its role may read these two columns only.
SELECT retailer_id, shard FROM retailers WHERE retailer_id = $1;

-- name: ensure_retailer_state
INSERT INTO retailer_state (retailer_id) VALUES ($1) ON CONFLICT (retailer_id) DO NOTHING;

-- name: lock_reservations
-- A retailer's reservations take turns on its fence row. FOR NO KEY UPDATE
-- waits for a diff raising the fence and for an offboarding (FOR UPDATE)
-- but not for applies (FOR KEY SHARE). A recorded offboarding refuses the
-- reservation.
SELECT reserved_generation, coalesce(offboarding_generation, 0)
FROM retailer_state WHERE retailer_id = $1 FOR NO KEY UPDATE;

-- name: lock_state_for_offboarding
-- The offboarding takes the fence row FOR UPDATE, as a diff raising the
-- fence does: it waits for every transaction holding the row (applies in
-- flight, reservations, confirmations, arrivals, diffs) and every later one
-- waits for it and then sees it recorded.
SELECT coalesce(offboarding_generation, 0) FROM retailer_state WHERE retailer_id = $1 FOR UPDATE;

-- name: record_offboarding
-- The shard's record that the retailer is offboarded by generation $2; the
-- retailer_offboarded trigger raises the fence to it in this statement
-- (0082).
UPDATE retailer_state SET offboarding_generation = $2 WHERE retailer_id = $1;

-- name: reservation_window_full
-- With $2 reservations allowed per rolling hour: the $2-th newest
-- reservation of the last hour, if there is one, means the hour is full; the
-- answer is how long until it is an hour old and a slot frees. The undos
-- the pipeline reserves itself (I10) are not the retailer's: they do not count.
SELECT extract(epoch FROM created_at + interval '1 hour' - now())::float8 FROM generations
WHERE retailer_id = $1 AND created_at > now() - interval '1 hour' AND undoes IS NULL
ORDER BY generation DESC OFFSET $2 - 1 LIMIT 1;

-- name: reserve_generation
UPDATE retailer_state SET reserved_generation = reserved_generation + 1
WHERE retailer_id = $1
RETURNING reserved_generation;

-- name: supersede_awaiting
-- A new reservation supersedes the retailer's older slots still awaiting
-- their upload (an upload to one later is ignored); one past its expiry
-- ends expired instead. A dry run's slot is never superseded (DESIGN 13).
UPDATE generations
SET state = CASE WHEN upload_expires_at < now() THEN 'expired' ELSE 'superseded' END,
    superseded_by = CASE WHEN upload_expires_at < now() THEN NULL ELSE $2::bigint END
WHERE retailer_id = $1 AND generation < $2 AND state = 'awaiting_upload' AND NOT dry_run;

-- name: lock_state_for_arrival
-- An arrival holds the fence row FOR KEY SHARE (it waits for an
-- offboarding, FOR UPDATE) and reads whether the retailer is offboarded.
SELECT coalesce(offboarding_generation, 0) FROM retailer_state WHERE retailer_id = $1 FOR KEY SHARE;

-- name: mark_arrived
-- The upload of a generation arrived at $3 (the S3 event's time). Taken
-- when it arrived within $4 of the slot's expiry (S3 checks a presigned
-- URL's expiry when the PUT starts, so a long upload ends after it);
-- later, the slot ends expired. Only a slot awaiting its upload (or read
-- as expired) changes; the answer is the generation's state. $5 is the
-- retailer's offboarding generation (0: none): an upload to an older slot
-- taken in time ends superseded by it, never received; the offboarding's
-- own slot never expires (its empty object may be written by a DELETE
-- retried long after the first, DESIGN 5).
WITH a AS (
    SELECT retailer_id, generation, offboarding OR $3 <= upload_expires_at + $4::interval AS in_time,
           generation < $5 AND NOT dry_run AS offboarded
    FROM generations WHERE retailer_id = $1 AND generation = $2
)
UPDATE generations
SET state = CASE WHEN NOT a.in_time THEN 'expired' WHEN a.offboarded THEN 'superseded' ELSE 'received' END,
    superseded_by = CASE WHEN a.in_time AND a.offboarded THEN $5::bigint END,
    received_at = CASE WHEN a.in_time THEN $3 END,
    error_code = CASE WHEN a.in_time THEN NULL ELSE 'upload_expired' END,
    error_message = CASE WHEN a.in_time THEN NULL
        ELSE 'the upload arrived at ' || to_char($3 AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') ||
             ', after its slot expired at ' || to_char(generations.upload_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') ||
             '; reserve a new generation and upload again' END
FROM a
WHERE generations.retailer_id = a.retailer_id AND generations.generation = a.generation
  AND generations.state IN ('awaiting_upload', 'expired')
RETURNING generations.state;

-- name: insert_generation
INSERT INTO generations (retailer_id, generation, format, object_key, upload_expires_at)
VALUES ($1, $2, $3, $4, $5);

-- name: select_generation
-- A slot past its expiry reads expired (persisted by the next reservation
-- or a late arrival); an offboarding's never expires (mark_arrived).
SELECT retailer_id, generation, CASE WHEN state = 'awaiting_upload' AND upload_expires_at < now() AND NOT offboarding THEN 'expired' ELSE state END, format, object_key, upload_expires_at, created_at,
       received_at, applied_at, superseded_by, coalesce(error_code, ''), coalesce(error_message, ''),
       coalesce(error_line, 0), inserted, updated, deleted, unchanged, products,
       chunks_total, chunks_applied, confirmed, error_problems, error_more_problems,
       mode, source_generation, undoes, dry_run, plan_pages, plan_baseline
FROM generations WHERE retailer_id = $1 AND generation = $2;

-- name: list_generations
SELECT retailer_id, generation, CASE WHEN state = 'awaiting_upload' AND upload_expires_at < now() AND NOT offboarding THEN 'expired' ELSE state END, format, object_key, upload_expires_at, created_at,
       received_at, applied_at, superseded_by, coalesce(error_code, ''), coalesce(error_message, ''),
       coalesce(error_line, 0), inserted, updated, deleted, unchanged, products,
       chunks_total, chunks_applied, confirmed, error_problems, error_more_problems,
       mode, source_generation, undoes, dry_run, plan_pages, plan_baseline
FROM generations WHERE retailer_id = $1 AND generation < $3
ORDER BY generation DESC LIMIT $2;

-- name: lock_state_for_update
-- The diff raises the fence: FOR UPDATE waits for every apply transaction
-- holding FOR KEY SHARE on the row, and blocks new ones until it commits.
-- With the retailer's offboarding generation (0: none): once offboarded,
-- only that one is diffed.
SELECT latest_generation, applied_generation, applied_products, coalesce(offboarding_generation, 0)
FROM retailer_state WHERE retailer_id = $1 FOR UPDATE;

-- name: lock_state_for_apply
-- Applies and the diff's progress marks hold the fence row FOR KEY SHARE:
-- compatible with each other and with the applied_generation update, but not
-- with a diff raising latest_generation.
SELECT latest_generation FROM retailer_state WHERE retailer_id = $1 FOR KEY SHARE;

-- name: lock_state_for_confirm
-- A confirmation takes the fence row FOR NO KEY UPDATE, like a
-- reservation: it conflicts with an offboarding (FOR UPDATE) whatever the
-- order, so a hold confirmed before the offboarding is superseded by it,
-- and one confirmed after finds it recorded (409 retailer_offboarded).
SELECT latest_generation, coalesce(offboarding_generation, 0)
FROM retailer_state WHERE retailer_id = $1 FOR NO KEY UPDATE;

-- name: select_generation_for_update
SELECT state, confirmed, coalesce(object_etag, '') FROM generations WHERE retailer_id = $1 AND generation = $2 FOR UPDATE;

-- name: pin_upload
-- The first version read wins; every later caller gets it back and compares.
UPDATE generations SET object_etag = coalesce(object_etag, $3)
WHERE retailer_id = $1 AND generation = $2
RETURNING object_etag;

-- name: raise_fence
UPDATE retailer_state SET latest_generation = $2
WHERE retailer_id = $1 AND latest_generation < $2;

-- name: supersede_older
-- Every older generation that has not finished stops here (I4): its pending
-- chunks will find the fence raised and write nothing. A dry run writes
-- nothing and is never superseded (DESIGN 13).
UPDATE generations SET state = 'superseded', superseded_by = $2
WHERE retailer_id = $1 AND generation < $2
  AND state IN ('received', 'diffing', 'applying', 'held') AND NOT dry_run;

-- name: mark_superseded
UPDATE generations SET state = 'superseded', superseded_by = nullif($3::bigint, $2::bigint),
       received_at = coalesce(received_at, now())
WHERE retailer_id = $1 AND generation = $2 AND state NOT IN ('applied', 'superseded', 'rejected', 'expired', 'previewed');

-- name: mark_diffing
-- A re-run of a generation already applying keeps it applying: its chunks in
-- flight must still count.
UPDATE generations SET state = 'diffing', received_at = coalesce(received_at, now()),
       error_code = NULL, error_message = NULL, error_line = NULL
WHERE retailer_id = $1 AND generation = $2 AND state IN ('awaiting_upload', 'received', 'diffing', 'held');

-- name: start_diff_run
-- A diff run starts (after mark_diffing): one more attempt (I10), and
-- where its content is read from.
UPDATE generations SET diff_attempts = diff_attempts + 1
WHERE retailer_id = $1 AND generation = $2
RETURNING format, object_key, diff_attempts, coalesce(undoes, 0), offboarding, coalesce(last_failure, '');

-- name: record_diff_failure
-- Why the generation's last diff run failed (bounded by the caller).
UPDATE generations SET last_failure = $3
WHERE retailer_id = $1 AND generation = $2 AND state IN ('received', 'diffing', 'applying', 'held');

-- name: stopped_generations
-- Generations newer than the baseline whose index was written: they may have
-- sent chunks, and some of those may have been applied before they stopped.
SELECT generation FROM generations
WHERE retailer_id = $1 AND generation > $2 AND generation < $3 AND index_written
ORDER BY generation;

-- name: reject_generation
-- A snapshot that cannot be read (I7), or whose pinned upload is gone or was
-- replaced, ends here from any unfinished state: a generation that can no
-- longer finish never stays diffing, applying or held. Its chunks still in
-- flight find it no longer applying and write nothing.
UPDATE generations SET state = 'rejected', error_code = $3, error_message = $4, error_line = $5,
       error_problems = $6, error_more_problems = $7
WHERE retailer_id = $1 AND generation = $2 AND state IN ('received', 'diffing', 'applying', 'held');

-- name: lock_state_for_reject
-- A rejection (or a hold) decides, under the fence row, whether the catalog
-- must be returned to the applied generation (I10) and reserves the undo:
-- FOR NO KEY UPDATE, like a reservation (it waits for a diff raising the
-- fence, not for applies).
SELECT latest_generation FROM retailer_state WHERE retailer_id = $1 FOR NO KEY UPDATE;

-- name: select_generation_for_reject
SELECT state, offboarding, coalesce(undoes, 0), dry_run FROM generations
WHERE retailer_id = $1 AND generation = $2 FOR UPDATE;

-- name: undo_needed
-- Whether the catalog would keep a mix of generations (I10) once $2 (0:
-- none) is rejected: the generation that took over last (the fence's)
-- ended without applying (it is $2, or it was rejected or superseded), some
-- generation after the applied one, up to it, wrote its index (its chunks
-- may have been applied, I5), and no newer upload is on its way to take
-- over (its diff would repair those rows, as after any stopped
-- generation; a held one waits on its retailer and does not count). A
-- rejected undo is not undone again: the chain stops for an operator.
-- Never for an offboarded retailer: an undo would bring its catalog back
-- (its offboarding's empty snapshot repairs whatever was written).
SELECT s.offboarding_generation IS NULL
   AND (l.generation = $2 OR l.state IN ('rejected', 'superseded'))
   AND NOT (l.undoes IS NOT NULL AND (l.generation = $2 OR l.state = 'rejected'))
   AND EXISTS (SELECT 1 FROM generations g WHERE g.retailer_id = $1 AND g.generation > s.applied_generation
                                            AND g.generation <= s.latest_generation AND g.index_written)
   AND NOT EXISTS (SELECT 1 FROM generations g WHERE g.retailer_id = $1 AND g.generation > s.latest_generation
                                                AND g.generation <> $2 AND g.received_at IS NOT NULL AND NOT g.dry_run
                                                AND g.state IN ('received', 'diffing', 'applying'))
FROM retailer_state s JOIN generations l ON l.retailer_id = s.retailer_id AND l.generation = s.latest_generation
WHERE s.retailer_id = $1;

-- name: reserve_undo
-- The rollback that returns the catalog to the applied generation after $2
-- is rejected half way (I10): the retailer's next generation, whose content
-- is the applied generation's upload (its pinned version; none, the empty
-- catalog, when nothing was ever applied), received now and confirmed in
-- advance. Its diff repairs every row $2 (and any generation it stopped)
-- may have written, as any newer generation would (I5).
WITH r AS (
    UPDATE retailer_state SET reserved_generation = reserved_generation + 1
    WHERE retailer_id = $1
    RETURNING reserved_generation, applied_generation
), src AS (
    SELECT g.format, g.object_key, g.object_etag
    FROM generations g JOIN r ON g.retailer_id = $1 AND g.generation = r.applied_generation
)
INSERT INTO generations (retailer_id, generation, format, object_key, object_etag, upload_expires_at,
                         state, received_at, confirmed, mode, source_generation, undoes)
SELECT $1, r.reserved_generation, coalesce(src.format, 'csv'), coalesce(src.object_key, ''), src.object_etag, now(),
       'received', now(), true, 'rollback', r.applied_generation, $2
FROM r LEFT JOIN src ON true
RETURNING generation, source_generation;

-- name: rollback_source
-- The content of applied generation $2 that a rollback to it reads: its
-- format, object and pinned version (no row: never applied).
SELECT format, object_key, object_etag
FROM generations WHERE retailer_id = $1 AND generation = $2 AND state = 'applied';

-- name: reserve_rollback
-- A retailer's rollback to applied generation $2: its next generation,
-- whose content is $2's (format $3, object $4 at version $5), received now;
-- its diff goes through the holds like any upload's.
WITH r AS (
    UPDATE retailer_state SET reserved_generation = reserved_generation + 1
    WHERE retailer_id = $1
    RETURNING reserved_generation
)
INSERT INTO generations (retailer_id, generation, format, object_key, object_etag, upload_expires_at,
                         state, received_at, confirmed, mode, source_generation)
SELECT $1, r.reserved_generation, $3, $4, $5, now(), 'received', now(), false, 'rollback', $2
FROM r
RETURNING generation;

-- name: hold_generation
-- A held snapshot's diff runs count again from its confirmation (I10).
UPDATE generations SET state = 'held', error_code = $3, error_message = $4, error_line = NULL,
       inserted = $5, updated = $6, deleted = $7, unchanged = $8, products = $9, attribute_names = $10,
       diff_attempts = 0, last_failure = NULL
WHERE retailer_id = $1 AND generation = $2 AND state = 'diffing';

-- name: start_applying
UPDATE generations SET state = 'applying', index_written = true,
       inserted = $3, updated = $4, deleted = $5, unchanged = $6, products = $7,
       chunks_total = $8, attribute_names = $9, error_code = NULL, error_message = NULL, error_line = NULL
WHERE retailer_id = $1 AND generation = $2 AND state IN ('diffing', 'applying');

-- name: attribute_names
-- A generation's attribute names (NULL: unknown, or no such generation).
SELECT attribute_names FROM generations WHERE retailer_id = $1 AND generation = $2;

-- name: object_key
-- Where a generation's content was read from ('' for none).
SELECT object_key FROM generations WHERE retailer_id = $1 AND generation = $2;

-- name: offboarding_generation
-- The retailer's offboarding generation, and whether it was beaten before
-- the shard recorded offboardings (0082): superseded, or a newer
-- generation reserved after it.
SELECT g.generation,
       g.state = 'superseded' OR EXISTS (SELECT 1 FROM generations n WHERE n.retailer_id = $1 AND n.generation > g.generation)
FROM generations g WHERE g.retailer_id = $1 AND g.offboarding;

-- name: retire_offboarding
-- An offboarding generation that was beaten (see offboarding_generation)
-- stays in the history as the superseded generation it is, no longer the
-- retailer's offboarding: the next one takes its place.
UPDATE generations SET offboarding = false WHERE retailer_id = $1 AND offboarding;

-- name: insert_offboarding_generation
-- The offboarding's empty snapshot, confirmed in advance (no empty_snapshot hold).
INSERT INTO generations (retailer_id, generation, format, object_key, upload_expires_at, confirmed, offboarding)
VALUES ($1, $2, 'csv', $3, $4, true, true);

-- name: confirm_generation
UPDATE generations SET confirmed = true
WHERE retailer_id = $1 AND generation = $2 AND state = 'held';

-- name: count_applied_chunk
INSERT INTO applied_chunks (retailer_id, generation, seq) VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING;

-- name: lock_state_for_chunk
-- An apply transaction's fence (as lock_state_for_apply), and whether gen's
-- diff found nothing to update or delete (its chunks only insert: their
-- rows are COPYed straight into products, see chunkwrite.go). The fence is
-- also the retailer's write floor (shard 0110, raised by collection): a
-- generation below it may write nothing (it reads as superseded).
SELECT CASE WHEN $2 < s.write_floor THEN greatest(s.latest_generation, s.write_floor) ELSE s.latest_generation END,
       coalesce(g.updated = 0 AND g.deleted = 0, false)
FROM retailer_state s
LEFT JOIN generations g ON g.retailer_id = s.retailer_id AND g.generation = $2
WHERE s.retailer_id = $1
FOR KEY SHARE OF s;

-- name: create_apply_stage
-- The session's staging table of a chunk's ops (chunkwrite.go): COPYed
-- into (in id order), read by stage_write, emptied at commit. Temporary: no
-- WAL, private to the session, made once per session. Its primary key is
-- how stage_write reads an op's values for a product row.
CREATE TEMP TABLE IF NOT EXISTS apply_stage (
    product_id   text COLLATE "C" PRIMARY KEY,
    attributes   jsonb,
    content_hash bytea,
    del          boolean NOT NULL
) ON COMMIT DELETE ROWS;

-- name: stage_plans
-- stage_write is key lookups by design: one probe of the products primary
-- key for each staged op, whatever the statistics say. They say little:
-- the staging table has none, and a catalog just loaded by COPY none
-- either (the planner may think the retailer has one row, and would then
-- scan the retailer's whole catalog once per op in a nested loop: 52 s for
-- a 5,000-op chunk of a 20,000-row catalog, measured). stage_write is
-- written without a join the planner could turn around (single-table
-- updates on `product_id = ANY(...)`, the op's values read from the stage
-- by its key, the inserts' anti join driven by the stage), and for this
-- transaction no sequential or bitmap scan, hash, merge or materialized
-- join is planned: every scan of products is a primary-key probe. (A scan
-- turned off still costs 10^10 in the plan, which would make PostgreSQL
-- JIT-compile the statement, ~0.7 s: no JIT either.)
SELECT set_config('jit', 'off', true), set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('enable_material', 'off', true);

-- name: stage_write
-- Writes a staged chunk ($3 ops) of generation $2 in one statement, one
-- set-based write for each kind of op, and returns how many product rows it
-- changed and the ids of the ops that changed nothing (the chunk's change
-- event leaves them out):
--   up:  the upserts of products that exist, fenced (I2, I3): a row stamped
--        with this generation or a newer one is never touched (a newer
--        tombstone stays dead), and a row whose content is already equal is
--        not written (I6; not even locked);
--   ins: the upserts of products the shard does not hold (live or
--        tombstone); one inserted meanwhile by another transaction meets the
--        same fence through ON CONFLICT;
--   del: the deletes, fenced: the row becomes a tombstone stamped with this
--        generation (I3), unless a newer generation owns it or it is gone.
-- All three see the same snapshot: a row up updates exists for ins.
WITH up AS (
    UPDATE products AS p
    SET (attributes, content_hash) = (SELECT s.attributes, s.content_hash FROM apply_stage AS s WHERE s.product_id = p.product_id),
        generation = $2, deleted = false, updated_at = now()
    WHERE p.retailer_id = $1
      AND p.product_id = ANY (ARRAY(SELECT product_id FROM apply_stage WHERE NOT del))
      AND p.generation < $2
      AND (p.deleted OR p.content_hash IS DISTINCT FROM (SELECT s.content_hash FROM apply_stage AS s WHERE s.product_id = p.product_id))
    RETURNING p.product_id
), ins AS (
    INSERT INTO products AS p (retailer_id, product_id, attributes, content_hash, generation, deleted, updated_at)
    SELECT $1, s.product_id, s.attributes, s.content_hash, $2, false, now()
    FROM apply_stage AS s
    WHERE NOT s.del
      AND NOT EXISTS (SELECT 1 FROM products AS x WHERE x.retailer_id = $1 AND x.product_id = s.product_id)
    ON CONFLICT (retailer_id, product_id) DO UPDATE
    SET attributes = EXCLUDED.attributes, content_hash = EXCLUDED.content_hash,
        generation = EXCLUDED.generation, deleted = false, updated_at = EXCLUDED.updated_at
    WHERE p.generation < EXCLUDED.generation
      AND (p.deleted OR p.content_hash IS DISTINCT FROM EXCLUDED.content_hash)
    RETURNING p.product_id
), del AS (
    UPDATE products AS p
    SET deleted = true, attributes = NULL, content_hash = NULL, generation = $2, updated_at = now()
    WHERE p.retailer_id = $1
      AND p.product_id = ANY (ARRAY(SELECT product_id FROM apply_stage WHERE del))
      AND p.generation < $2 AND NOT p.deleted
    RETURNING p.product_id
), written AS (
    SELECT product_id FROM up UNION ALL SELECT product_id FROM ins UNION ALL SELECT product_id FROM del
), n AS (
    SELECT count(*) AS written FROM written
)
-- $3 is the number of staged ops: the unchanged ids are only looked for
-- when some op wrote nothing.
SELECT n.written,
       CASE WHEN n.written < $3
            THEN ARRAY(SELECT product_id FROM apply_stage EXCEPT SELECT product_id FROM written)
            ELSE '{}' END
FROM n;

-- name: insert_change_event
-- The chunk's change event (DESIGN 8), in the chunk's transaction: a claim
-- check on the chunk object, less the ops that changed nothing. The relay
-- publishes it (writing the change object first when some ops changed
-- nothing) and deletes it.
INSERT INTO outbox (event_type, retailer_id, generation, seq, object_key, sha256, changed, unchanged_ids)
VALUES ('catalog.changes', $1, $2, $3, $4, $5, $6, $7);

-- name: count_chunk_progress
UPDATE generations SET chunks_applied = chunks_applied + 1
WHERE retailer_id = $1 AND generation = $2 AND state = 'applying'
RETURNING chunks_applied, chunks_total, products;

-- name: mark_applied
UPDATE generations SET state = 'applied', applied_at = now()
WHERE retailer_id = $1 AND generation = $2 AND state = 'applying';

-- name: advance_baseline
UPDATE retailer_state SET applied_generation = $2, applied_products = $3
WHERE retailer_id = $1 AND applied_generation < $2;

-- name: select_latest
SELECT latest_generation FROM retailer_state WHERE retailer_id = $1;

-- name: select_state
SELECT reserved_generation, latest_generation, applied_generation, applied_products
FROM retailer_state WHERE retailer_id = $1;

-- name: unfinished_generations
-- Work that a lost message would leave stuck: diffs not finished, applies not
-- done, confirmed holds. Re-sending their diff job is harmless (idempotent).
SELECT retailer_id, generation, object_key FROM generations
WHERE state IN ('received', 'diffing', 'applying') OR (state = 'held' AND confirmed)
ORDER BY retailer_id, generation;

-- name: retailer_by_token
SELECT retailer_id FROM retailers WHERE token_hash = $1;

-- name: newer_arrived
-- The newest generation after $2 whose upload arrived and was not rejected
-- or too late (0: none). An older upload that has not taken over stops for it.
-- A delta stops nothing: it waits for the older ones; a dry run's never
-- counts: it takes nothing over (DESIGN 13).
SELECT coalesce(max(generation), 0) FROM generations
WHERE retailer_id = $1 AND generation > $2 AND received_at IS NOT NULL
  AND state NOT IN ('rejected', 'expired') AND mode <> 'delta' AND NOT dry_run;

-- name: supersede_not_started
-- gen stops for a newer arrival: only before it applies (a generation that
-- took over is stopped by the fence of the one that takes over next).
UPDATE generations SET state = 'superseded', superseded_by = $3
WHERE retailer_id = $1 AND generation = $2 AND state IN ('awaiting_upload', 'received', 'diffing', 'held');

-- name: directory_apply
-- The product directory follows a chunk's ops after the chunk's shard commit
-- ($3 product ids in byte order, $4 true for a delete). Fenced by generation:
-- an entry stamped with this generation or a newer one is never changed, so
-- re-applying a chunk writes nothing, and a delete stays as a tombstone
-- stamped with its generation so that a late older upsert cannot revive it.
-- (An UPDATE ... FROM the ids plus an INSERT of the rest was measured: no
-- faster, and a join the planner may turn into a scan of the directory.)
INSERT INTO product_directory AS d (product_id, retailer_id, generation, deleted)
SELECT u.product_id, $1, $2, u.deleted
FROM unnest($3::text[], $4::boolean[]) AS u(product_id, deleted)
ON CONFLICT (product_id, retailer_id) DO UPDATE
SET generation = EXCLUDED.generation, deleted = EXCLUDED.deleted, updated_at = now()
WHERE d.generation < EXCLUDED.generation;

-- name: directory_known
-- Whether the directory holds an entry of the retailer for any of the ids
-- $2 (by the primary key; a day's change stops at the first).
SELECT EXISTS (SELECT 1 FROM product_directory WHERE product_id = ANY($2::text[]) AND retailer_id = $1);

-- name: directory_lookup
-- Retailers whose catalog holds a live product with this id, at most $2.
SELECT retailer_id FROM product_directory
WHERE product_id = $1 AND NOT deleted
ORDER BY retailer_id LIMIT $2;

-- name: chunk_counted
-- Whether a chunk's transaction committed (its shard writes are in).
SELECT EXISTS (SELECT 1 FROM applied_chunks WHERE retailer_id = $1 AND generation = $2 AND seq = $3);

-- name: writer_lsn
-- The writer's current WAL position, in bytes (replica staleness probe).
SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint;

-- name: replica_lsn
-- What a hot standby has replayed, in bytes; NULL when the server is not a
-- streaming standby (a primary, or a replica that does not report it).
SELECT CASE WHEN pg_is_in_recovery()
            THEN (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint END;

-- name: storefront_product
-- The storefront's product lookup: the primary key, live rows only; the
-- caller knows the ids, so only the rest is read.
SELECT attributes, generation, updated_at
FROM products WHERE retailer_id = $1 AND product_id = $2 AND NOT deleted;

-- name: storefront_product_batch
-- The storefront's lookups of concurrent requests in one query: $1 and $2
-- are parallel arrays of retailer and product ids; each live product comes
-- back with the 1-based position of its key (absent or deleted: no row).
-- A primary-key probe a key (as storefront_products_by_id).
SELECT k.i, p.attributes, p.generation, p.updated_at
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(retailer_id, product_id, i)
CROSS JOIN LATERAL (SELECT attributes, generation, updated_at FROM products
                    WHERE retailer_id = k.retailer_id AND product_id = k.product_id COLLATE "C" AND NOT deleted LIMIT 1) AS p;

-- name: storefront_generations
-- The storefront's view of a retailer's generations on a replica: the
-- newest that took over and the newest applied (no row: no upload yet).
SELECT latest_generation, applied_generation FROM retailer_state WHERE retailer_id = $1;

-- name: storefront_page
-- The storefront's keyset page: product_id > $2 in byte order (COLLATE "C").
SELECT product_id, attributes, generation, updated_at
FROM products WHERE retailer_id = $1 AND product_id > $2 AND NOT deleted
ORDER BY product_id LIMIT $3;

-- name: outbox_unsynced
-- The relay's claims and settles commit without waiting for their WAL to
-- reach disk: a claim lost in a crash of the server leaves its rows
-- claimable at once, a settle lost publishes its rows again (at least
-- once, same ids), while the fsync would keep the apply that calls the
-- fast path waiting behind the other commits of the shard. Queued before
-- the statement in one batch (one round trip, one implicit transaction).
SET LOCAL synchronous_commit = off;

-- name: outbox_claim_retailer
-- The relay's fast path: a retailer's events that no relay holds and none
-- is parked, oldest first, leased for $3 seconds to the claim, whose token
-- is the transaction's id. The rows are locked only for this statement
-- (SKIP LOCKED: a concurrent claim takes other rows); the lease keeps them
-- the claim's after it. RETURNING's order is none: the caller sorts.
UPDATE outbox o SET claimed_until = now() + make_interval(secs => $3), claim = pg_current_xact_id()::text::bigint
FROM (SELECT id FROM outbox
      WHERE retailer_id = $1 AND parked_at IS NULL AND (claimed_until IS NULL OR claimed_until <= now())
      ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) c
WHERE o.id = c.id
RETURNING o.id, o.event_type, o.retailer_id, o.generation, coalesce(o.seq, 0), coalesce(o.object_key, ''),
          coalesce(o.sha256, ''), coalesce(o.changed, 0), coalesce(o.unchanged_ids, '{}'), o.status, o.event_time,
          o.created_at, o.attempts, o.claim;

-- name: outbox_claim_old
-- The relay's sweeper: as outbox_claim_retailer, of every retailer, the
-- events written at least $1 seconds ago (their fast path failed, or a
-- replay wrote them). A row leased away (another relay's, or waiting out
-- its backoff) or parked is passed over: the rows after it are taken.
UPDATE outbox o SET claimed_until = now() + make_interval(secs => $3), claim = pg_current_xact_id()::text::bigint
FROM (SELECT id FROM outbox
      WHERE created_at <= now() - make_interval(secs => $1) AND parked_at IS NULL
        AND (claimed_until IS NULL OR claimed_until <= now())
      ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) c
WHERE o.id = c.id
RETURNING o.id, o.event_type, o.retailer_id, o.generation, coalesce(o.seq, 0), coalesce(o.object_key, ''),
          coalesce(o.sha256, ''), coalesce(o.changed, 0), coalesce(o.unchanged_ids, '{}'), o.status, o.event_time,
          o.created_at, o.attempts, o.claim;

-- name: outbox_settle
-- What became of a claim's rows, in one statement: the published ones
-- ($1) are deleted, whoever holds them now (they are out: a relay that
-- re-claimed one after the lease publishes it again, at least once). Each
-- failed one ($3.. in parallel arrays) is changed only while claim $2
-- still holds it: its error kept, counted or not, then parked or released
-- after its backoff ($7 seconds; 0: at once). Returns how many were
-- deleted and how many failures were recorded.
WITH done AS (
    DELETE FROM outbox WHERE id = ANY($1::bigint[]) RETURNING 1
), failed AS (
    UPDATE outbox o SET attempts = o.attempts + f.counted::int,
                        last_error = coalesce(nullif(f.error, ''), o.last_error),
                        parked_at = CASE WHEN f.park THEN now() END,
                        claimed_until = CASE WHEN f.park OR f.retry_secs <= 0 THEN NULL
                                             ELSE now() + make_interval(secs => f.retry_secs) END,
                        claim = NULL
    FROM unnest($3::bigint[], $4::text[], $5::bool[], $6::bool[], $7::float8[]) AS f(id, error, counted, park, retry_secs)
    WHERE o.id = f.id AND o.claim = $2 AND o.parked_at IS NULL
    RETURNING 1
)
SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM failed);

-- name: outbox_delete
-- A claim whose rows were all published: they are deleted, whoever holds
-- them now (as outbox_settle's done).
DELETE FROM outbox WHERE id = ANY($1::bigint[]);

-- name: outbox_health
-- How many events wait to be published and how old the oldest is
-- (seconds; 0 when none), and how many are parked.
SELECT count(*) FILTER (WHERE parked_at IS NULL),
       coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE parked_at IS NULL)), 0)::float8,
       count(*) FILTER (WHERE parked_at IS NOT NULL)
FROM outbox;

-- name: outbox_parked
-- The parked events ($1: of one retailer; '' every), first parked first,
-- at most $2.
SELECT id, event_type, retailer_id, generation, coalesce(seq, 0), attempts, coalesce(last_error, ''),
       created_at, parked_at
FROM outbox WHERE parked_at IS NOT NULL AND ($1 = '' OR retailer_id = $1)
ORDER BY parked_at, id LIMIT $2;

-- name: outbox_parked_count
-- How many events are parked ($1: of one retailer; '' every).
SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL AND ($1 = '' OR retailer_id = $1);

-- name: outbox_peek
-- Every event of the outbox, leased and parked ones included, oldest
-- first, as a claim returns them (claim 0: none), taking none.
SELECT id, event_type, retailer_id, generation, coalesce(seq, 0), coalesce(object_key, ''), coalesce(sha256, ''),
       coalesce(changed, 0), coalesce(unchanged_ids, '{}'), status, event_time, created_at, attempts, coalesce(claim, 0)
FROM outbox ORDER BY id;

-- name: outbox_unpark
-- An operator's redrive of parked events ($1: of one retailer; '' every),
-- at most $2, first parked first: back in the outbox with no attempt
-- counted and no lease, for the sweeper (they are older than its age).
-- Their last error stays until a publish replaces it. Returns how many
-- were unparked and how many are still parked (of that retailer).
WITH picked AS (
    SELECT id FROM outbox WHERE parked_at IS NOT NULL AND ($1 = '' OR retailer_id = $1)
    ORDER BY parked_at, id LIMIT $2
), unparked AS (
    UPDATE outbox o SET parked_at = NULL, attempts = 0, claimed_until = NULL, claim = NULL
    FROM picked WHERE o.id = picked.id
    RETURNING 1
)
SELECT (SELECT count(*) FROM unparked),
       (SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL AND ($1 = '' OR retailer_id = $1)) - (SELECT count(*) FROM unparked);

-- name: replay_events
-- Writes again, as outbox rows, the events of a retailer since $2: the
-- changes of every chunk applied since then and the lifecycle event of every
-- generation whose state changed since then (its current state), each with
-- its original time, unless the same event is still pending. The relay
-- publishes them under their original ids, so consumers ignore what they
-- have seen: a replay is safe to run any number of times.
WITH chunks AS (
    INSERT INTO outbox (event_type, retailer_id, generation, seq, event_time)
    SELECT 'catalog.changes', c.retailer_id, c.generation, c.seq, c.applied_at
    FROM applied_chunks c
    WHERE c.retailer_id = $1 AND c.applied_at >= $2
      AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.retailer_id = c.retailer_id AND o.generation = c.generation
                                                AND o.seq = c.seq)
    RETURNING 1
), lifecycle AS (
    INSERT INTO outbox (event_type, retailer_id, generation, status, event_time)
    SELECT 'catalog.snapshot.' || g.state, g.retailer_id, g.generation, to_jsonb(g), g.state_changed_at
    FROM generations g
    WHERE g.retailer_id = $1 AND g.state_changed_at >= $2 AND g.state IN ('applied', 'rejected', 'held', 'superseded') AND NOT g.dry_run
      AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.retailer_id = g.retailer_id AND o.generation = g.generation
                                                AND o.event_type = 'catalog.snapshot.' || g.state)
    RETURNING 1
)
SELECT (SELECT count(*) FROM chunks), (SELECT count(*) FROM lifecycle);

-- name: newer_versions
-- A consumer's version state (DESIGN 8): for each key ($3, with its
-- generation $4), in the order given, whether the generation is higher
-- than the one recorded (nothing recorded: it is). A read: no lock. One
-- primary-key probe a key (a correlated subquery), not a join: on a table
-- never analyzed (right after a first load recorded its versions) the
-- planner put a join's inner side as a scan of the retailer's every row,
-- compared with every key (TestNewerVersionsProbesByKey).
SELECT coalesce((SELECT v.generation < u.generation FROM consumer_versions v
                 WHERE v.consumer = $1 AND v.retailer_id = $2 AND v.product_id = u.product_id COLLATE "C"), true)
FROM unnest($3::text[], $4::bigint[]) WITH ORDINALITY AS u(product_id, generation, i)
ORDER BY u.i;

-- name: record_versions
-- Records for each key ($3) its highest generation ($4) where that is
-- higher than the recorded one (only raising: a record again, or after a
-- newer one, changes nothing). Rows go in key order, so concurrent records
-- lock in one order.
INSERT INTO consumer_versions AS v (consumer, retailer_id, product_id, generation)
SELECT $1, $2, u.product_id, max(u.generation)
FROM unnest($3::text[], $4::bigint[]) AS u(product_id, generation)
GROUP BY u.product_id
ORDER BY u.product_id COLLATE "C"
ON CONFLICT (consumer, retailer_id, product_id) DO UPDATE SET generation = EXCLUDED.generation
WHERE v.generation < EXCLUDED.generation;

-- name: usage_add
-- Adds counters to retailer-days (DESIGN 10): $1 days, $2 retailer ids, then
-- one array per counter, all of one length, no key twice (the caller sums
-- first). Rows go in key order, so concurrent batches lock in one order.
INSERT INTO usage_daily AS u (day, retailer_id, uploads, bytes_uploaded, rows_received, rows_inserted,
    rows_updated, rows_deleted, chunks, db_rows_written, reads, read_bytes, api_requests,
    s3_class_a, s3_class_b, s3_byte_days, sqs_standard_requests, sqs_fifo_requests, sns_requests)
SELECT * FROM unnest($1::date[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
    $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[],
    $14::bigint[], $15::bigint[], $16::bigint[], $17::bigint[], $18::bigint[], $19::bigint[])
ORDER BY 1, 2
ON CONFLICT (day, retailer_id) DO UPDATE SET
    uploads = u.uploads + EXCLUDED.uploads,
    bytes_uploaded = u.bytes_uploaded + EXCLUDED.bytes_uploaded,
    rows_received = u.rows_received + EXCLUDED.rows_received,
    rows_inserted = u.rows_inserted + EXCLUDED.rows_inserted,
    rows_updated = u.rows_updated + EXCLUDED.rows_updated,
    rows_deleted = u.rows_deleted + EXCLUDED.rows_deleted,
    chunks = u.chunks + EXCLUDED.chunks,
    db_rows_written = u.db_rows_written + EXCLUDED.db_rows_written,
    reads = u.reads + EXCLUDED.reads,
    read_bytes = u.read_bytes + EXCLUDED.read_bytes,
    api_requests = u.api_requests + EXCLUDED.api_requests,
    s3_class_a = u.s3_class_a + EXCLUDED.s3_class_a,
    s3_class_b = u.s3_class_b + EXCLUDED.s3_class_b,
    s3_byte_days = u.s3_byte_days + EXCLUDED.s3_byte_days,
    sqs_standard_requests = u.sqs_standard_requests + EXCLUDED.sqs_standard_requests,
    sqs_fifo_requests = u.sqs_fifo_requests + EXCLUDED.sqs_fifo_requests,
    sns_requests = u.sns_requests + EXCLUDED.sns_requests;

-- name: usage_functions_add
-- Adds Lambda usage per function to retailer-days, like usage_add.
INSERT INTO usage_functions AS f (day, retailer_id, function, invocations, mb_ms)
SELECT * FROM unnest($1::date[], $2::text[], $3::text[], $4::bigint[], $5::bigint[])
ORDER BY 1, 2, 3
ON CONFLICT (day, retailer_id, function) DO UPDATE SET
    invocations = f.invocations + EXCLUDED.invocations,
    mb_ms = f.mb_ms + EXCLUDED.mb_ms;

-- name: usage_select
SELECT day, retailer_id, uploads, bytes_uploaded, rows_received, rows_inserted,
    rows_updated, rows_deleted, chunks, db_rows_written, reads, read_bytes, api_requests,
    s3_class_a, s3_class_b, s3_byte_days, sqs_standard_requests, sqs_fifo_requests, sns_requests
FROM usage_daily WHERE day BETWEEN $1 AND $2
ORDER BY day, retailer_id;

-- name: usage_functions_select
SELECT day, retailer_id, function, invocations, mb_ms
FROM usage_functions WHERE day BETWEEN $1 AND $2
ORDER BY day, retailer_id, function;

-- name: set_webhook
INSERT INTO webhooks AS w (retailer_id, url, secret_sealed) VALUES ($1, $2, $3)
ON CONFLICT (retailer_id) DO UPDATE SET url = EXCLUDED.url, secret_sealed = EXCLUDED.secret_sealed, updated_at = now();

-- name: get_webhook
SELECT retailer_id, url, secret_sealed, updated_at FROM webhooks WHERE retailer_id = $1;

-- name: delete_webhook
DELETE FROM webhooks WHERE retailer_id = $1;

-- The migration runner's own (migrate.go).

-- name: migrate_lock
-- Concurrent runners take turns.
SELECT pg_advisory_lock(7261001);

-- name: migrate_unlock
SELECT pg_advisory_unlock(7261001);

-- name: migrate_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());

-- name: migrate_applied
SELECT version, name FROM schema_migrations;

-- name: migrate_record
INSERT INTO schema_migrations (version, name) VALUES ($1, $2);
