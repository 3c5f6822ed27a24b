-- Reconciliation numbers its repairs' change events (0031).
GRANT SELECT, INSERT, UPDATE ON generation_repairs TO catalog_ops;
