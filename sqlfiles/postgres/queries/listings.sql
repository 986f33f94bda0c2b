-- name: ModelListing :one
SELECT provider, listing, read_at FROM model_listings WHERE provider = $1;

-- name: AddModelListing :exec
-- The row a first claim updates (read_at 0: no listing yet).
INSERT INTO model_listings (provider, listing, read_at, claimed_until) VALUES ($1, '{}', 0, 0)
ON CONFLICT (provider) DO NOTHING;

-- name: ClaimModelListing :execrows
-- Claims the next ask of a provider's vendor until claimed_until, when
-- its listing was read at or before stale_before and no claim holds at now:
-- one row changed is the claim won, none is another replica's (or a
-- fresh listing).
UPDATE model_listings SET claimed_until = sqlc.arg(claimed_until)
WHERE provider = sqlc.arg(provider) AND read_at <= sqlc.arg(stale_before) AND claimed_until <= sqlc.arg(now);

-- name: PutModelListing :exec
-- A listing read later replaces one read earlier, and ends the claim.
INSERT INTO model_listings (provider, listing, read_at, claimed_until) VALUES ($1, $2, $3, 0)
ON CONFLICT (provider) DO UPDATE SET listing = excluded.listing, read_at = excluded.read_at, claimed_until = 0
WHERE excluded.read_at >= model_listings.read_at;
