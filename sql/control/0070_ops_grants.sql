-- The ops function's tables on the control database (after 0051: the
-- roles exist). Reconciliation records its runs and results, and prunes old
-- runs (their results go with them).
GRANT SELECT, INSERT, UPDATE, DELETE ON reconcile_runs, reconcile_results TO catalog_ops;
