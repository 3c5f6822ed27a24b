-- Reconciliation's repairs of a generation (DESIGN 9): each repair
-- transaction writes one change event, numbered after the generation's
-- chunks (seq = chunks_total + repairs so far), so that its event id
-- ("{retailer}:{generation}:changes:{seq}") is new. Grants: 0071.
CREATE TABLE generation_repairs (
    retailer_id     text NOT NULL,
    generation      bigint NOT NULL,
    repairs         integer NOT NULL DEFAULT 0,
    last_repair_at  timestamptz,
    PRIMARY KEY (retailer_id, generation)
);
