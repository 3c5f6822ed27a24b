-- Retailer registry: which shard holds a retailer, its token hash and its thresholds.
CREATE TABLE retailers (
    retailer_id            text PRIMARY KEY,
    shard                  integer NOT NULL,
    token_hash             bytea NOT NULL,
    -- I8: a snapshot that would delete more than this fraction of a catalog of at
    -- least hold_min_products products is held until the retailer confirms it.
    hold_delete_fraction   double precision NOT NULL DEFAULT 0.5,
    hold_min_products      integer NOT NULL DEFAULT 100,
    created_at             timestamptz NOT NULL DEFAULT now()
);

-- Tokens are looked up by hash: 401 for an unknown token, 403 for another retailer's.
CREATE UNIQUE INDEX retailers_token_hash ON retailers (token_hash);
