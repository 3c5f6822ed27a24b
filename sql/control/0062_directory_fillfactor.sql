-- Room for HOT updates in the product directory (as products, shard
-- 0062): every chunk of a day's change re-stamps its products' entries with
-- the new generation; with 10% of each page free an entry usually stays on
-- its page, with no new primary-key entry.
ALTER TABLE product_directory SET (fillfactor = 90);
