package postgres_test

import (
	"context"
	"testing"

	"github.com/darkroom-mcp/darkroom/storage/postgres"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
	"github.com/darkroom-mcp/darkroom/storage/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Engine {
		d, err := postgres.Open(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		rows := func(t *testing.T, table string) (n int64) {
			if err := d.Pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		return storetest.Engine{Generations: d.Generations(), Tasks: d.Tasks(), Shared: true, Rows: rows, Schemas: d.ModelSchemas(), Listings: d.ModelListings()}
	})
}
