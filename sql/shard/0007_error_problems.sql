-- A rejected snapshot's problems (DESIGN 4: up to the first 100, each
-- {"code", "line", "message"}), so that a retailer fixes a file in one
-- round; error_code/_message/_line stay those of the first. NULL for a
-- generation that was not rejected for its content.
ALTER TABLE generations ADD COLUMN error_problems jsonb;
-- Problems past the first 100 exist.
ALTER TABLE generations ADD COLUMN error_more_problems boolean NOT NULL DEFAULT false;
