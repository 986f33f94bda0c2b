package postgres

import "context"

// RevalidateGenerations is the generation cache's part of a resync, for
// tests that cannot wait for the listener's.
func (d *DB) RevalidateGenerations(ctx context.Context) error { return d.revalidateGenerations(ctx) }
