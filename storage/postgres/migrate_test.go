package postgres_test

import (
	"context"
	"sync"
	"testing"

	sqlfiles "github.com/darkroom-mcp/darkroom/sqlfiles"
	"github.com/darkroom-mcp/darkroom/storage/postgres"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
)

// TestReplicasMigrateAtOnce: replicas starting together on a fresh
// database all open it, and each migration is applied exactly once (the
// advisory lock orders them; without it they race on CREATE TABLE).
func TestReplicasMigrateAtOnce(t *testing.T) {
	url := pgtest.URL(t)
	const replicas = 6
	var wg sync.WaitGroup
	dbs := make([]*postgres.DB, replicas)
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() { dbs[i], errs[i] = postgres.Open(context.Background(), url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	steps, err := sqlfiles.Migrations(sqlfiles.PostgresSchema, "postgres/schema")
	if err != nil {
		t.Fatal(err)
	}
	var applied, distinct, top int
	if err := dbs[0].Pool.QueryRow(context.Background(),
		"SELECT COUNT(*), COUNT(DISTINCT version), COALESCE(MAX(version), 0) FROM darkroom_schema").Scan(&applied, &distinct, &top); err != nil {
		t.Fatal(err)
	}
	if applied != len(steps) || distinct != len(steps) || top != steps[len(steps)-1].N {
		t.Fatalf("darkroom_schema: %d rows, %d versions, top %d; want each of %d migrations once", applied, distinct, top, len(steps))
	}
}
