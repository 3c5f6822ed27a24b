-- Per-retailer fencing state on its shard. latest_generation is the fencing
-- token: the newest generation whose upload has arrived. Every apply transaction
-- takes this row FOR SHARE and refuses to write when latest_generation is newer
-- than its own generation (I2, I4); a newer diff takes it FOR UPDATE to raise it.
CREATE TABLE retailer_state (
    retailer_id         text PRIMARY KEY,
    reserved_generation bigint NOT NULL DEFAULT 0,
    latest_generation   bigint NOT NULL DEFAULT 0,
    applied_generation  bigint NOT NULL DEFAULT 0,
    applied_products    bigint NOT NULL DEFAULT 0
);

-- One row per reserved generation: the status the upload routes report.
CREATE TABLE generations (
    retailer_id     text NOT NULL,
    generation      bigint NOT NULL,
    state           text NOT NULL DEFAULT 'awaiting_upload'
                    CHECK (state IN ('awaiting_upload','received','diffing','applying','applied','superseded','rejected','held')),
    format          text NOT NULL DEFAULT '',
    object_key      text NOT NULL,
    upload_expires_at timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    received_at     timestamptz,
    applied_at      timestamptz,
    superseded_by   bigint,
    error_code      text,
    error_message   text,
    error_line      integer,
    inserted        bigint NOT NULL DEFAULT 0,
    updated         bigint NOT NULL DEFAULT 0,
    deleted         bigint NOT NULL DEFAULT 0,
    unchanged       bigint NOT NULL DEFAULT 0,
    products        bigint NOT NULL DEFAULT 0,
    chunks_total    integer NOT NULL DEFAULT 0,
    chunks_applied  integer NOT NULL DEFAULT 0,
    -- the diff wrote this generation's sorted index: its rows may have been sent (I5)
    index_written   boolean NOT NULL DEFAULT false,
    confirmed       boolean NOT NULL DEFAULT false,
    PRIMARY KEY (retailer_id, generation)
);

-- The catalog. A deleted product stays as a tombstone stamped with the
-- generation that deleted it, so a late older write cannot bring it back (I3).
CREATE TABLE products (
    retailer_id   text NOT NULL,
    product_id    text COLLATE "C" NOT NULL,
    attributes    jsonb,
    content_hash  bytea,
    generation    bigint NOT NULL,
    deleted       boolean NOT NULL DEFAULT false,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (retailer_id, product_id)
);

-- Chunks applied, counted exactly once in the transaction that writes their rows.
CREATE TABLE applied_chunks (
    retailer_id text NOT NULL,
    generation  bigint NOT NULL,
    seq         integer NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (retailer_id, generation, seq)
);

-- Transactional outbox: one change event per row actually changed, written in
-- the chunk's transaction; a relay publishes and marks them.
CREATE TABLE outbox (
    id            bigserial PRIMARY KEY,
    retailer_id   text NOT NULL,
    generation    bigint NOT NULL,
    product_id    text COLLATE "C" NOT NULL,
    op            text NOT NULL CHECK (op IN ('upsert','delete')),
    attributes    jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    published_at  timestamptz
);
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
