-- Single-use, pinned uploads (DESIGN 5). The diff records the version (S3
-- ETag, quoted as S3 returns it) of the object it first reads for a
-- generation, and every later read of that generation (pass 2, a re-run, a
-- confirmation) asks for exactly that version (If-Match): a generation's
-- content never changes under it, and another version of the key is refused.
ALTER TABLE generations ADD COLUMN object_etag text;
