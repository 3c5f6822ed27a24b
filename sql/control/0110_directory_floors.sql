-- Collection of the product directory (DESIGN 14). The directory's entries
-- of deleted products are tombstones stamped with the deleting generation
-- (0002), for the same reason as the shard's: a late write of an older
-- generation must not bring an entry back. Collection removes them, so the
-- directory gets the retailer-level fence the shard has (retailer_state.
-- write_floor, shard 0110): floor is the oldest generation whose chunks may
-- still change the retailer's entries, raised by collection in the
-- transaction that deletes entries, and read by every directory write of a
-- chunk (directory_floor) before it writes: a generation below it writes
-- nothing. No row: floor 0.
CREATE TABLE directory_floors (
    retailer_id text PRIMARY KEY,
    floor       bigint NOT NULL DEFAULT 0
);

-- gc_collect_directory: raises the retailer's directory floor to $2 (the
-- shard's write_floor, read by the caller; it only rises) and deletes,
-- among the ids $3, the retailer's entries that are tombstones stamped at
-- or below it. SECURITY DEFINER (as the shard's gc_ functions): the ops
-- role gets no DELETE on the directory, only this rule.
CREATE FUNCTION gc_collect_directory(retailer text, new_floor bigint, ids text[])
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    f bigint;
    n bigint;
BEGIN
    INSERT INTO directory_floors AS d (retailer_id, floor) VALUES (retailer, new_floor)
    ON CONFLICT (retailer_id) DO UPDATE SET floor = greatest(d.floor, EXCLUDED.floor)
    RETURNING d.floor INTO f;
    WITH d AS (
        DELETE FROM product_directory p
        WHERE p.product_id = ANY (ids) AND p.retailer_id = retailer AND p.deleted AND p.generation <= f
        RETURNING 1
    )
    SELECT count(*) INTO n FROM d;
    RETURN n;
END $$;

REVOKE EXECUTE ON FUNCTION gc_collect_directory(text, bigint, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gc_collect_directory(text, bigint, text[]) TO catalog_ops;
GRANT SELECT ON directory_floors TO catalog_apply, catalog_ops;
