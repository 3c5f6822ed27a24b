-- The storefront reads a retailer's latest (taken-over) and applied
-- generations on the replica that serves it, to decide whether a client
-- revalidating a newer version than the replica's answer needs the writer
-- (functions/serve/read: only for a generation the replica knows and has not
-- applied; a made-up generation is treated as stale and never reaches the
-- writer). Those columns only: not the reservations, not the counts.
GRANT SELECT (retailer_id, latest_generation, applied_generation) ON retailer_state TO catalog_read;
