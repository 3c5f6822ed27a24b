-- Retailers' webhooks (DESIGN 5 and 8): where their lifecycle events go,
-- and the secret that signs each delivery, sealed with AES-256-GCM under a
-- key kept outside the database (functions/publish/webhook, SecretBox: HMAC needs
-- the secret itself, so a hash could not serve; sealed, a copy of this
-- table signs nothing). A retailer removed from the registry takes its
-- webhook with it.
CREATE TABLE webhooks (
    retailer_id   text PRIMARY KEY REFERENCES retailers (retailer_id) ON DELETE CASCADE,
    url           text NOT NULL,
    secret_sealed bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Grants: the roles made, if need be, as in 0020 (numbered before 0050).
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['catalog_upload', 'catalog_consumers'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;
            END;
        END IF;
    END LOOP;
END $$;
-- upload: the webhook routes save, show and remove it.
GRANT SELECT, INSERT, UPDATE, DELETE ON webhooks TO catalog_upload;
-- consumers: the webhooks consumer reads it for each delivery.
GRANT SELECT ON webhooks TO catalog_consumers;
