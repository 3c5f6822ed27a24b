-- Outbox rows are claim checks: (retailer, generation, product, op, content
-- hash). The relay reads the product's attributes from products when it
-- publishes, so a first load does not write every document twice (the
-- attributes were half of a first load's database time). Consumers are
-- version-aware: an event carries the product's state at publish time and
-- the generation that changed it.
ALTER TABLE outbox DROP COLUMN attributes;
ALTER TABLE outbox ADD COLUMN content_hash bytea;
