package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/darkroom-mcp/darkroom/storage/sqlite"
	"github.com/darkroom-mcp/darkroom/storage/storetest"
)

// TestContract runs the engine-agnostic store contract on SQLite.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Engine {
		d, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		rows := func(t *testing.T, table string) (n int64) {
			if err := d.Read.QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		return storetest.Engine{Generations: d.Generations(), Tasks: d.Tasks(), Rows: rows, Schemas: d.ModelSchemas(), Listings: d.ModelListings()}
	})
}
