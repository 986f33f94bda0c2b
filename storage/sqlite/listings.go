package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/storage/sqlite/sqlitedb"
)

// ModelListings is the store of the providers' last model listings on
// this database.
func (d *DB) ModelListings() provider.ListingStore { return listingStore{d} }

type listingStore struct{ d *DB }

func (s listingStore) ModelListing(ctx context.Context, name string) (provider.StoredListing, error) {
	r, err := s.d.Queries.ModelListing(ctx, name)
	if errors.Is(err, sql.ErrNoRows) || err == nil && r.ReadAt == 0 {
		return provider.StoredListing{}, provider.ErrNotFound // none, or only a claim
	}
	if err != nil {
		return provider.StoredListing{}, err
	}
	return provider.StoredListing{Provider: r.Provider, Listing: r.Listing, ReadAt: time.UnixMilli(r.ReadAt).UTC()}, nil
}

func (s listingStore) ClaimModelListing(ctx context.Context, name string, staleBefore, now, until time.Time) (won bool, err error) {
	err = s.d.Write(ctx, func(ctx context.Context, tx *Tx) error {
		if err := tx.q.AddModelListing(ctx, name); err != nil {
			return err
		}
		n, err := tx.q.ClaimModelListing(ctx, sqlitedb.ClaimModelListingParams{Provider: name, StaleBefore: staleBefore.UnixMilli(), Now: now.UnixMilli(), ClaimedUntil: until.UnixMilli()})
		won = n == 1
		return err
	})
	return won, err
}

func (s listingStore) PutModelListing(ctx context.Context, l provider.StoredListing) error {
	return s.d.Write(ctx, func(ctx context.Context, tx *Tx) error {
		return tx.q.PutModelListing(ctx, sqlitedb.PutModelListingParams{Provider: l.Provider, Listing: l.Listing, ReadAt: l.ReadAt.UnixMilli()})
	})
}
