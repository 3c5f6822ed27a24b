-- Every generation ends, and never leaves a mix (I10; docs/ARCHITECTURE.md,
-- "Every generation ends").
--
-- mode: where a generation's content comes from (DESIGN 13): a full
-- snapshot the retailer uploaded, or a rollback whose content is the
-- catalog of source_generation (0: the empty catalog) read from that
-- generation's upload (object_key and object_etag are copied from it).
-- undoes: a rollback the pipeline made itself to return the catalog to the
-- last applied generation after `undoes` was rejected half way (apply_failed,
-- diff_failed): it goes through the normal diff, chunks, fences and events,
-- and is confirmed in advance (no hold).
-- diff_attempts: the diff runs of the generation so far (a held snapshot
-- starts again at its confirmation); past CATALOG_DIFF_ATTEMPTS the
-- generation ends rejected (diff_failed). last_failure: why the last failed
-- run failed, for the status message, `why` and the log.
ALTER TABLE generations
    ADD COLUMN mode text NOT NULL DEFAULT 'full' CHECK (mode IN ('full', 'delta', 'rollback')),
    ADD COLUMN source_generation bigint,
    ADD COLUMN undoes bigint,
    ADD COLUMN diff_attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN last_failure text,
    ADD CONSTRAINT generations_rollback_source CHECK ((mode = 'rollback') = (source_generation IS NOT NULL));

-- Ending a generation that cannot finish (the apply, after a chunk the
-- database refuses on every try; the diff, on its last attempt; the
-- sweeper, after its re-drives) reserves the undo generation in the same
-- transaction: those functions reserve like the upload function does.
GRANT INSERT ON generations TO catalog_diff, catalog_apply, catalog_ops;
GRANT UPDATE (reserved_generation) ON retailer_state TO catalog_diff, catalog_apply, catalog_ops;
