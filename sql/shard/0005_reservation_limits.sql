-- Per-retailer limits (DESIGN 5). A slot whose upload never arrived before
-- its expiry ends 'expired'; reserving a new generation supersedes the
-- retailer's older slots still awaiting their upload (the partial index
-- finds them without reading the retailer's history).
ALTER TABLE generations DROP CONSTRAINT generations_state_check;
ALTER TABLE generations ADD CONSTRAINT generations_state_check
    CHECK (state IN ('awaiting_upload','received','diffing','applying','applied','superseded','rejected','held','expired'));
CREATE INDEX generations_awaiting_upload ON generations (retailer_id, generation) WHERE state = 'awaiting_upload';
