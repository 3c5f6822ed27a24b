-- The stuck-generation sweeper's record (DESIGN 9): for each generation it
-- re-drove (a diff job re-sent, or the missing chunks sent again from their
-- objects), how many times and when last. A generation re-driven
-- CATALOG_STUCK_MAX_REDRIVES times (default 3) is left for an operator:
-- `why` reports it stuck and the GenerationsStuck metric raises an alarm.
-- Grants: 0070_ops_grants.sql.
CREATE TABLE generation_redrives (
    retailer_id     text NOT NULL,
    generation      bigint NOT NULL,
    redrives        integer NOT NULL DEFAULT 0,
    last_redrive_at timestamptz,
    last_action     text,
    PRIMARY KEY (retailer_id, generation)
);
