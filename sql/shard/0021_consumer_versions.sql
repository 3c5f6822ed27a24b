-- The consumers' version state (DESIGN 8): per consumer, the highest
-- generation it has written of each product. A consumer writes a change
-- only when its generation is higher, so duplicates, late events of an
-- older generation and replays change nothing. One row per product a
-- consumer has seen, on the retailer's own shard: it grows with the
-- catalog and scales with the shards. Rows of deleted products stay (they
-- hold the generation that deleted them).
CREATE TABLE consumer_versions (
    consumer    text NOT NULL,
    retailer_id text NOT NULL,
    product_id  text COLLATE "C" NOT NULL,
    generation  bigint NOT NULL,
    PRIMARY KEY (consumer, retailer_id, product_id)
);

-- Grants: made, if need be, as in 0020 (numbered before the roles' 0050).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'catalog_consumers') THEN
        BEGIN
            CREATE ROLE catalog_consumers LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
END $$;
GRANT SELECT, INSERT, UPDATE ON consumer_versions TO catalog_consumers;
