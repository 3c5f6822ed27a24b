-- The outbox never wedges a shard (I12; docs/ARCHITECTURE.md, "Change
-- events"). A relay no longer holds a transaction open while it publishes:
-- it claims rows in one short statement (a lease: claimed_until, with the
-- claim's token), publishes outside any transaction, and settles in another
-- short statement: what was published is deleted; a failure is recorded
-- (last_error, attempts) and the row is leased away for a backoff, so the
-- next claim takes the rows after it; a row the topic refuses for what it
-- is, or that failed 5 times, is parked (parked_at): kept, counted, listed
-- and re-published by an operator (`catalogctl dlq list|redrive outbox`),
-- never taken by a relay. A row whose lease ran out (its relay died) is
-- claimable again: at least once, under the same event id.
--
-- attempts: failed publishes counted against the row (reset by a redrive).
-- claimed_until, claim: the lease and the token of the claim that holds it
-- (the transaction id of the claim); a settle changes a failed row only
-- while its claim still holds it.
-- last_error: why the last publish failed, bounded like every message (I12).
ALTER TABLE outbox
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN claimed_until timestamptz,
    ADD COLUMN claim bigint,
    ADD COLUMN parked_at timestamptz,
    ADD COLUMN last_error text CHECK (octet_length(last_error) <= 512);

-- The sweeper's claim walks the rows it may take in id order; parked rows
-- (any number of them) are not in its way. The listing of parked rows.
CREATE INDEX outbox_unparked ON outbox (id) WHERE parked_at IS NULL;
CREATE INDEX outbox_parked ON outbox (parked_at) WHERE parked_at IS NOT NULL;

-- Grants. The roles that take outbox rows (relay; apply and diff for their
-- fast path) hold SELECT, UPDATE, DELETE on the whole table (0020, 0051):
-- that covers the new columns. The ops function lists parked rows (SELECT,
-- 0051) and re-publishes them: it may reset exactly the parking columns,
-- never delete a row or change what an event says.
GRANT UPDATE (attempts, claimed_until, claim, parked_at) ON outbox TO catalog_ops;
