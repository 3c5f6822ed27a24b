-- Moves of a retailer between shards (DESIGN 14): one row per move, its
-- state and the checkpoint it resumes from (functions/stores/pgstore/move.go).
-- At most one move of a retailer runs at a time.
CREATE TABLE retailer_moves (
    move_id         text PRIMARY KEY,
    retailer_id     text NOT NULL REFERENCES retailers (retailer_id),
    from_shard      integer NOT NULL,
    to_shard        integer NOT NULL CHECK (to_shard <> from_shard),
    state           text NOT NULL DEFAULT 'copying' CHECK (state IN ('copying', 'switching', 'done', 'failed')),
    step            text NOT NULL DEFAULT 'start',
    cursor_consumer text NOT NULL DEFAULT '',
    cursor_id       text COLLATE "C" NOT NULL DEFAULT '',
    cursor_seq      bigint NOT NULL DEFAULT 0,
    rows_copied     bigint NOT NULL DEFAULT 0,
    rows_total      bigint NOT NULL DEFAULT 0,
    error           text CHECK (octet_length(error) <= 512),
    attempts        integer NOT NULL DEFAULT 0,
    lease_token     text,
    lease_until     timestamptz,
    switched_at     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX retailer_moves_running ON retailer_moves (retailer_id) WHERE state IN ('copying', 'switching');

GRANT SELECT, INSERT, UPDATE ON retailer_moves TO catalog_ops;
GRANT UPDATE (shard) ON retailers TO catalog_ops;
