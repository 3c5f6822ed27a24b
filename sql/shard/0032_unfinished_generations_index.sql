-- The stuck-generation sweeper looks, every few minutes, for generations
-- with work left (received, diffing, applying, a confirmed hold) that have
-- not moved for a while: a partial index keeps that look from reading the
-- retailers' whole history.
CREATE INDEX generations_unfinished ON generations (state_changed_at)
    WHERE state IN ('received', 'diffing', 'applying', 'held');
