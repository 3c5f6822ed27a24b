-- Room for HOT updates (docs/PERFORMANCE.md, "Apply"): a day's changes
-- rewrite 1-5% of a retailer's products in place. With every page full
-- (fillfactor 100, what COPY leaves) each changed row moved to another page
-- and took a new primary-key entry: two more pages written, and after a
-- checkpoint a full-page image of each in the WAL. With 10% free a changed
-- row usually stays on its page (a heap-only tuple): no index write, one
-- page. New pages only; a table rewrite (VACUUM FULL) applies it to old ones.
ALTER TABLE products SET (fillfactor = 90);
