-- The ops function's tables on the shards (after 0051: the roles exist).
-- The sweeper records its re-drives; nothing else reads or writes them.
GRANT SELECT, INSERT, UPDATE ON generation_redrives TO catalog_ops;
