-- Index rebuilds after collection (DESIGN 14; reindex.go). A year of random
-- deletes and inserts leaves a B-tree's leaf pages about two thirds full
-- (a page is split when full and freed only when empty), against the 90%
-- of a freshly built one: collection ends a retailer's run by rebuilding,
-- with REINDEX INDEX CONCURRENTLY, the churned indexes whose size is past
-- a threshold of what a fresh build of their live entries would take.

-- name: reindex_estimates
-- The B-tree indexes of the tables collection churns (products,
-- consumer_versions): their pages now, and the pages a fresh build would
-- take, estimated from the table's row count (pg_class.reltuples, as the
-- last VACUUM or ANALYZE left it) and the average size of the key columns
-- in a sample of at most ~200 heap pages: per entry an 8-byte tuple header
-- and the keys, rounded up to 8, and a 4-byte line pointer; per leaf page
-- 8,152 usable bytes filled to the index's fillfactor (90 by default); and
-- one page in 100 above the leaves. Indexes of fewer than $1 pages are
-- left out (their rebuild gains nothing).
WITH idx AS (
    SELECT i.indexrelid AS oid, i.indexrelid::regclass::text AS name, c.relname::text AS tbl, c.reltuples, c.relpages,
           pg_relation_size(i.indexrelid) / current_setting('block_size')::bigint AS pages,
           coalesce((SELECT split_part(o, '=', 2)::int FROM unnest(ic.reloptions) o WHERE o LIKE 'fillfactor=%'), 90) AS fillfactor,
           ARRAY(SELECT a.attname::text FROM unnest(i.indkey) k JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k) AS cols
    FROM pg_index i
    JOIN pg_class c ON c.oid = i.indrelid
    JOIN pg_class ic ON ic.oid = i.indexrelid
    JOIN pg_am am ON am.oid = ic.relam AND am.amname = 'btree'
    WHERE c.relname IN ('products', 'consumer_versions') AND c.relnamespace = 'public'::regnamespace
      AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL
)
SELECT name, tbl, cols, pages, greatest(reltuples, 0)::bigint, relpages::bigint, fillfactor FROM idx
WHERE pages >= $1
ORDER BY name;

-- name: reindex_leftovers
-- Invalid indexes a REINDEX CONCURRENTLY that did not finish left on the
-- tables collection rebuilds (named <index>_ccnew or _ccold, a number
-- after when taken): dropped before the next rebuild.
SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_class ic ON ic.oid = i.indexrelid
WHERE c.relname IN ('products', 'consumer_versions') AND c.relnamespace = 'public'::regnamespace
  AND NOT i.indisvalid AND ic.relname ~ '_cc(new|old)[0-9]*$';

-- name: reindex_lock
-- One rebuild a shard at a time (a session lock of the rebuild's own
-- connection, released when it ends): another collection skips it.
SELECT pg_try_advisory_lock(hashtextextended('catalog.reindex', 0));

-- name: reindex_unlock
SELECT pg_advisory_unlock(hashtextextended('catalog.reindex', 0));
