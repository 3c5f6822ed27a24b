-- Reconciliation (DESIGN 9): each run, and what it found for each retailer.
-- A run of every retailer learns its total while it lists them (total 0
-- until then); it is done when every retailer has a result. Results are
-- written by the ops function as each retailer is checked (a retried check
-- overwrites its own). Runs older than 90 days are pruned by the scheduled
-- run. Grants: 0070_ops_grants.sql.
CREATE TABLE reconcile_runs (
    run_id       text PRIMARY KEY,
    retailer_id  text,                      -- NULL: every retailer
    repair       boolean NOT NULL,
    scheduled    boolean NOT NULL DEFAULT false,
    requested_at timestamptz NOT NULL DEFAULT now(),
    total        integer NOT NULL DEFAULT 0,
    finished_at  timestamptz
);
CREATE INDEX reconcile_runs_requested ON reconcile_runs (requested_at);

CREATE TABLE reconcile_results (
    run_id      text NOT NULL REFERENCES reconcile_runs ON DELETE CASCADE,
    retailer_id text NOT NULL,
    generation  bigint NOT NULL,
    checked_at  timestamptz NOT NULL DEFAULT now(),
    products    bigint NOT NULL DEFAULT 0,
    rows_live   bigint NOT NULL DEFAULT 0,
    missing     bigint NOT NULL DEFAULT 0,
    extra       bigint NOT NULL DEFAULT 0,
    different   bigint NOT NULL DEFAULT 0,
    repaired    bigint NOT NULL DEFAULT 0,
    unrepaired  bigint NOT NULL DEFAULT 0,
    examples    text[] NOT NULL DEFAULT '{}',
    skipped     text,
    error       text,
    PRIMARY KEY (run_id, retailer_id)
);
