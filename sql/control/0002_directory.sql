-- Product directory: which retailers use a product_id, for the storefront's
-- bare lookup GET /v1/products/{product_id}. The apply path keeps it after
-- each chunk's shard commit, fenced by generation like the catalog: an entry
-- is only changed by a newer generation, and a delete leaves a tombstone
-- stamped with the deleting generation so that a late write of an older
-- generation cannot bring the entry back (I2, I3 for the directory).
CREATE TABLE product_directory (
    product_id  text COLLATE "C" NOT NULL,
    retailer_id text NOT NULL,
    generation  bigint NOT NULL,
    deleted     boolean NOT NULL DEFAULT false,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (product_id, retailer_id)
);
