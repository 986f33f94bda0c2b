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
		return storetest.Engine{Generations: d.Generations(), Tasks: d.Tasks(), Shared: true}
	})
}
