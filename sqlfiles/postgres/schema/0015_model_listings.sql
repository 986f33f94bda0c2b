-- What each provider's vendor last listed (provider.Listing as JSON),
-- with when it was read, so an outage or a restart keeps the last
-- listing, and the replicas on one database ask the vendor once per
-- refresh between them: the one whose claim succeeds asks, the others
-- read what it stored. read_at 0 is a claim made before any listing.
CREATE TABLE model_listings (
    provider      TEXT PRIMARY KEY,
    listing       BYTEA NOT NULL,
    read_at       BIGINT NOT NULL, -- unix ms
    claimed_until BIGINT NOT NULL  -- unix ms: the claimer asks until then
);
