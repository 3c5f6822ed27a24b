-- name: awaiting_uploads
-- The retailer's slots still awaiting their upload and not past their
-- expiry, dry runs and an offboarding's slot left out (each driven by its
-- own flow): those a new reservation would supersede, oldest first, at
-- most $2.
SELECT generation FROM generations
WHERE retailer_id = $1 AND state = 'awaiting_upload' AND NOT dry_run AND NOT offboarding AND upload_expires_at >= now()
ORDER BY generation
LIMIT $2;
