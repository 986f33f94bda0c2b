package storetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
)

// testModelListings: of many replicas claiming a stale listing at once
// exactly one wins; a claim holds until it ends or a listing is stored;
// a fresh listing is claimed by none; a listing is read back byte for
// byte with its time, replaced by a later read and never by an older
// one; a provider never read is provider.ErrNotFound, even while
// claimed.
func testModelListings(t *testing.T, e Engine) {
	if e.Listings == nil {
		t.Skip("the engine has no model listing store")
	}
	ctx := context.Background()
	s := e.Listings
	const name = "openai"
	if _, err := s.ModelListing(ctx, name); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("never read: %v; want ErrNotFound", err)
	}
	claimers := func(now int64) int {
		var mu sync.Mutex
		var wg sync.WaitGroup
		won := 0
		for range 8 {
			wg.Go(func() {
				ok, err := s.ClaimModelListing(ctx, name, at(now-100), at(now), at(now+60))
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if ok {
					won++
				}
			})
		}
		wg.Wait()
		return won
	}
	if n := claimers(1000); n != 1 {
		t.Fatalf("%d of 8 replicas claimed the first ask; want 1", n)
	}
	if _, err := s.ModelListing(ctx, name); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("claimed, never read: %v; want ErrNotFound", err)
	}
	if n := claimers(1030); n != 0 {
		t.Fatalf("%d replicas claimed while a claim holds", n)
	}
	if n := claimers(1070); n != 1 { // the claimer died: its claim ran out
		t.Fatalf("%d replicas claimed after the claim ran out; want 1", n)
	}
	doc := []byte(`{"gpt-image-2":{"listed":true}}`)
	for _, l := range []provider.StoredListing{
		{Provider: name, Listing: doc, ReadAt: at(1080)},
		{Provider: name, Listing: []byte(`{"older":{"listed":true}}`), ReadAt: at(1075)}, // a slow reader racing a newer one
	} {
		if err := s.PutModelListing(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ModelListing(ctx, name)
	if err != nil || !bytes.Equal(got.Listing, doc) || !got.ReadAt.Equal(at(1080)) || got.Provider != name {
		t.Fatalf("read back %q at %v (%v); want the later read", got.Listing, got.ReadAt, err)
	}
	if n := claimers(1090); n != 0 { // stored at 1080: fresh until 1180
		t.Fatalf("%d replicas claimed a fresh listing", n)
	}
	if n := claimers(1200); n != 1 { // the stored listing ended the claim
		t.Fatalf("%d replicas claimed a stale listing; want 1", n)
	}
	if _, err := s.ModelListing(ctx, "google"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("another provider: %v", err)
	}
}
