-- Collection (DESIGN 14; collect.go): the ops function's batches. The rules
-- themselves are SQL functions of the migrations (shard and control 0110).

-- name: gc_tombstones
-- One batch of a retailer's tombstones (the window of ids $3): the floor
-- raised, the tombstones at or below it deleted with the consumers'
-- versions of their products (gc_collect_tombstones).
SELECT floor, tombstones, versions FROM gc_collect_tombstones($1, $2, $3::text[]);

-- name: gc_tombstone_window
-- The next window of a retailer's rows after id $2 (at most $3 rows, in the
-- primary key's order): the last id of the window ('' at the end) and the
-- ids of its tombstones stamped at or below $4. A read: no lock.
WITH w AS (
    SELECT product_id, deleted, generation FROM products
    WHERE retailer_id = $1 AND product_id > $2
    ORDER BY product_id LIMIT $3
)
SELECT coalesce((SELECT max(product_id) FROM w), ''),
       ARRAY(SELECT product_id FROM w WHERE deleted AND generation <= $4 ORDER BY product_id);

-- name: gc_chunks
SELECT gc_collect_chunks($1, $2, $3);

-- name: gc_outbox
SELECT gc_collect_outbox($1, $2, $3);

-- name: gc_directory
SELECT gc_collect_directory($1, $2, $3::text[]);

-- name: directory_floor
-- The retailer's directory floor (control 0110; 0: none): a chunk of an
-- older generation changes no entry.
SELECT coalesce((SELECT floor FROM directory_floors WHERE retailer_id = $1), 0);

-- name: write_floor
-- The retailer's write floor (shard 0110; 0: none yet).
SELECT coalesce((SELECT write_floor FROM retailer_state WHERE retailer_id = $1), 0);

-- name: gc_move_records
-- The forwarding addresses of moves that ended before $1 (the old shard's
-- record of a retailer that moved out: every route to here was dropped
-- RouteTTL after the switch, so it refuses nothing any more).
DELETE FROM shard_moves WHERE role = 'source' AND state = 'moved' AND changed_at < $1;
