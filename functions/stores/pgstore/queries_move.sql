-- Moving a retailer between shards (DESIGN 14; move.go, docs/ARCHITECTURE.md
-- "Moving a retailer between shards").

-- name: move_insert
-- A new move of $2 from $3 to $4; the unique index on running moves refuses
-- a second one of the retailer (23505).
INSERT INTO retailer_moves (move_id, retailer_id, from_shard, to_shard) VALUES ($1, $2, $3, $4);

-- name: move_get
SELECT move_id, state, retailer_id, from_shard, to_shard, step, rows_copied, rows_total, coalesce(error, ''),
       created_at, updated_at, cursor_consumer, cursor_id, cursor_seq, attempts
FROM retailer_moves WHERE move_id = $1;

-- name: move_running
-- The running moves, oldest first.
SELECT move_id FROM retailer_moves WHERE state IN ('copying', 'switching') ORDER BY created_at LIMIT $1;

-- name: move_lease
-- Takes (or keeps) the lease of a running move for $3 seconds: one runner
-- at a time; a runner that died leaves it to the next when it runs out.
UPDATE retailer_moves SET lease_token = $2, lease_until = now() + make_interval(secs => $3)
WHERE move_id = $1 AND state IN ('copying', 'switching')
  AND (lease_until IS NULL OR lease_until < now() OR lease_token = $2);

-- name: move_renew
-- The lease kept $3 seconds more by the runner that holds it (a step of
-- many transactions, a cleanup or an undo, renews it between them): 0 rows
-- when another runner took it, which then stops.
UPDATE retailer_moves SET lease_until = now() + make_interval(secs => $3)
WHERE move_id = $1 AND lease_token = $2 AND state IN ('copying', 'switching');

-- name: move_release
UPDATE retailer_moves SET lease_until = NULL WHERE move_id = $1 AND lease_token = $2;

-- name: move_checkpoint
-- The move's checkpoint, fenced by its lease: a runner that lost the lease
-- changes nothing (0 rows), and stops.
UPDATE retailer_moves
SET state = $3, step = $4, cursor_consumer = $5, cursor_id = $6, cursor_seq = $7,
    rows_copied = $8, rows_total = $9, attempts = 0, error = NULL, updated_at = now(),
    lease_until = now() + make_interval(secs => $10)
WHERE move_id = $1 AND lease_token = $2 AND state IN ('copying', 'switching');

-- name: move_failure
-- A step failed: counted, with why (the runner decides when it is final).
UPDATE retailer_moves SET attempts = attempts + 1, error = left($3, 500), updated_at = now()
WHERE move_id = $1 AND lease_token = $2
RETURNING attempts;

-- name: move_begin_abort
-- The undo of a move begins, fenced by its lease, and only while it has not
-- switched: a switch that committed although its runner saw it fail is
-- never undone (0 rows: the caller tells the lease lost from the switch).
UPDATE retailer_moves SET step = 'abort', cursor_consumer = '', cursor_id = '', cursor_seq = 0, attempts = 0,
    error = left($3, 500), updated_at = now(), lease_until = now() + make_interval(secs => $4)
WHERE move_id = $1 AND lease_token = $2 AND state IN ('copying', 'switching') AND switched_at IS NULL
RETURNING step;

-- name: move_switched
SELECT switched_at IS NOT NULL FROM retailer_moves WHERE move_id = $1;

-- name: move_end
-- The move ends (done or failed), fenced by its lease.
UPDATE retailer_moves SET state = $3, step = $4, error = nullif(left($5, 500), ''), updated_at = now(), lease_until = NULL
WHERE move_id = $1 AND lease_token = $2 AND state IN ('copying', 'switching');

-- name: move_switch_retailer
-- The switch: the retailer's shard changes (only from the move's source).
UPDATE retailers SET shard = $3 WHERE retailer_id = $1 AND shard = $2;

-- name: move_switch_step
UPDATE retailer_moves SET step = 'wait_routes', switched_at = now(), updated_at = now()
WHERE move_id = $1 AND lease_token = $2 AND state = 'switching' AND step = 'switch';

-- name: move_routes_wait
-- How long, from now, until every process has dropped the old route ($2
-- seconds after the switch).
SELECT greatest(0, extract(epoch FROM switched_at + make_interval(secs => $2) - now()))::float8
FROM retailer_moves WHERE move_id = $1;

-- name: move_lock
-- The retailer's move lock, taken exclusively by the move to start the log
-- or to freeze (the guard takes it shared in every write).
SELECT pg_advisory_xact_lock(hashtextextended('catalog.move:' || $1, 0));

-- name: move_bypass
-- The move's own writes pass the guard.
SELECT set_config('catalog.move', $1, true);

-- name: move_mark_source
-- The source's record of the move (copying), idempotent for its move; a
-- record of another move is left and refused by the caller.
INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard) VALUES ($1, $2, 'source', 'copying', $3)
ON CONFLICT (retailer_id) DO UPDATE SET changed_at = now()
WHERE shard_moves.move_id = EXCLUDED.move_id AND shard_moves.role = 'source'
RETURNING state;

-- name: move_mark_target
-- The target's record of the move (incoming). A record left by an earlier
-- move of the retailer out of this shard (moved) is replaced.
INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard) VALUES ($1, $2, 'target', 'incoming', $3)
ON CONFLICT (retailer_id) DO UPDATE
SET move_id = EXCLUDED.move_id, role = 'target', state = 'incoming', other_shard = EXCLUDED.other_shard, changed_at = now()
WHERE shard_moves.move_id = EXCLUDED.move_id OR shard_moves.state = 'moved';

-- name: move_target_fence
-- A batch on the target is the move's only while the target's record is
-- this move's (a zombie runner of a failed move writes nothing). Taken
-- FOR UPDATE: the move's transactions on the target run one at a time,
-- each reading the source after the one before it committed, so a runner
-- that lost its lease and copies late never lays an older value over a
-- newer one.
SELECT 1 FROM shard_moves WHERE retailer_id = $1 AND move_id = $2 AND role = 'target' FOR UPDATE;

-- name: move_set_source_state
UPDATE shard_moves SET state = $3, changed_at = now() WHERE retailer_id = $1 AND move_id = $2 AND role = 'source';

-- name: move_unmark
DELETE FROM shard_moves WHERE retailer_id = $1 AND move_id = $2;

-- name: move_count_rows
SELECT (SELECT count(*) FROM products WHERE retailer_id = $1) + (SELECT count(*) FROM consumer_versions WHERE retailer_id = $1);

-- name: move_products_end
-- The last product id of the next batch of $3 after $2 ('' when fewer are left).
SELECT coalesce((SELECT product_id FROM products WHERE retailer_id = $1 AND product_id > $2
                 ORDER BY product_id OFFSET $3 - 1 LIMIT 1), '');

-- name: move_versions_end
SELECT consumer, product_id FROM consumer_versions WHERE retailer_id = $1 AND (consumer, product_id) > ($2, $3::text COLLATE "C")
ORDER BY consumer, product_id OFFSET $4 - 1 LIMIT 1;

-- name: move_changes_batch
-- The oldest changes logged on the source. Not "after the last seq read":
-- a writer takes its seq when it writes and becomes visible when it
-- commits, so a change of a lower seq can appear after a higher one was
-- read; each is removed once copied (move_changes_copied) instead.
SELECT seq, consumer, product_id FROM move_changes WHERE retailer_id = $1 ORDER BY seq LIMIT $2;

-- name: move_changes_left
SELECT count(*) FROM move_changes WHERE retailer_id = $1;

-- name: move_changes_copied
-- The changes just copied (by seq: a change logged again since is kept).
DELETE FROM move_changes WHERE retailer_id = $1 AND seq = ANY($2::bigint[]);

-- name: move_changes_prune
DELETE FROM move_changes WHERE retailer_id = $1;

-- name: move_columns
-- A table's columns in order (both shards run the same migrations).
SELECT column_name::text FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position;
