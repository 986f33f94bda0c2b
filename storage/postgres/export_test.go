package postgres

import "context"

// RevalidateGenerations is the generation cache's part of a resync, for
// tests that cannot wait for the listener's.
func (d *DB) RevalidateGenerations(ctx context.Context) error { return d.revalidateGenerations(ctx) }

// OwnerWaiting is how many of owner's writes wait for the batch of that
// owner running now.
func (d *DB) OwnerWaiting(owner string) int {
	d.owners.mu.Lock()
	defer d.owners.mu.Unlock()
	return len(d.owners.waiting[owner])
}
