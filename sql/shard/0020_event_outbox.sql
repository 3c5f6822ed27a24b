-- Change events (DESIGN 8; docs/ARCHITECTURE.md, "Change events").
--
-- The outbox holds one row per event, never one per product: a chunk's
-- transaction writes one catalog.changes row, a claim check on the chunk
-- object it applied (object_key, sha256) with the ids of the chunk's ops
-- that changed nothing (unchanged_ids, usually empty); every state change
-- of a generation to applied, rejected, held or superseded writes one
-- catalog.snapshot.* row, by the trigger below, with the generation's row as
-- it is after the change. The relay publishes rows to SNS, then deletes them.
-- The per-product claim checks of 0001/0002 were never published: they go.
DROP TABLE outbox;
CREATE TABLE outbox (
    id            bigserial PRIMARY KEY,
    event_type    text NOT NULL CHECK (event_type IN ('catalog.changes', 'catalog.snapshot.applied',
                      'catalog.snapshot.rejected', 'catalog.snapshot.held', 'catalog.snapshot.superseded')),
    retailer_id   text NOT NULL,
    generation    bigint NOT NULL,
    -- catalog.changes: the chunk, the object its ops came from (NULL for a
    -- replay: the relay finds the change object), how many products it
    -- changed and which of its ops changed nothing.
    seq           integer,
    object_key    text,
    sha256        text,
    changed       integer,
    unchanged_ids text[],
    -- catalog.snapshot.*: the generations row after the state change.
    status        jsonb,
    -- when the change committed (the event's "time"; a replay keeps it)
    event_time    timestamptz NOT NULL DEFAULT now(),
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((event_type = 'catalog.changes') = (seq IS NOT NULL)),
    CHECK ((event_type = 'catalog.changes') <> (status IS NOT NULL))
);
-- the relay's fast path (one retailer's rows) and sweeper (old rows)
CREATE INDEX outbox_retailer ON outbox (retailer_id, id);
CREATE INDEX outbox_created ON outbox (created_at);

-- When each generation last changed state: the time of its lifecycle event,
-- and where a replay starts.
ALTER TABLE generations ADD COLUMN state_changed_at timestamptz;
UPDATE generations SET state_changed_at = coalesce(applied_at, received_at, created_at);
ALTER TABLE generations ALTER COLUMN state_changed_at SET DEFAULT now(),
                        ALTER COLUMN state_changed_at SET NOT NULL;

CREATE FUNCTION generation_state_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.state_changed_at := now();
    RETURN NEW;
END $$;
CREATE TRIGGER generation_state_changed BEFORE UPDATE OF state ON generations
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state)
    EXECUTE FUNCTION generation_state_changed();

-- The lifecycle event of a state change, in the state change's own
-- transaction, whatever statement made it: no code path can change a
-- generation's state without its event, or write the event without the
-- change.
CREATE FUNCTION generation_lifecycle_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox (event_type, retailer_id, generation, status, event_time)
    VALUES ('catalog.snapshot.' || NEW.state, NEW.retailer_id, NEW.generation, to_jsonb(NEW), NEW.state_changed_at);
    RETURN NULL;
END $$;
CREATE TRIGGER generation_lifecycle_event AFTER UPDATE OF state ON generations
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state
                       AND NEW.state IN ('applied', 'rejected', 'held', 'superseded'))
    EXECUTE FUNCTION generation_lifecycle_event();
CREATE TRIGGER generation_lifecycle_event_insert AFTER INSERT ON generations
    FOR EACH ROW WHEN (NEW.state IN ('applied', 'rejected', 'held', 'superseded'))
    EXECUTE FUNCTION generation_lifecycle_event();

-- Grants (docs/DEPLOY.md, "Database roles"). This migration is numbered
-- before the roles' (roles/0050, grants 0051): on a new database it makes
-- the roles it grants to, as 0050 makes them (0050 then finds them); on a
-- database migrated past 0051 it gives the new outbox the grants 0051 gave
-- the old one. The apply and the diff publish what they commit right after
-- the commit (the relay's fast path): they take, lock and delete outbox
-- rows as the relay does.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['catalog_upload', 'catalog_diff', 'catalog_apply', 'catalog_relay', 'catalog_ops'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- made meanwhile by another database's migration on the same server
            END;
        END IF;
    END LOOP;
END $$;
GRANT INSERT ON outbox TO catalog_upload, catalog_diff, catalog_apply, catalog_ops;
GRANT USAGE ON SEQUENCE outbox_id_seq TO catalog_upload, catalog_diff, catalog_apply, catalog_ops;
GRANT SELECT, UPDATE, DELETE ON outbox TO catalog_relay, catalog_apply, catalog_diff;
GRANT SELECT ON outbox TO catalog_ops;
