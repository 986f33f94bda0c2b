package main

import (
	"context"
	"os"
	"testing"

	"github.com/darkroom-mcp/darkroom/storage/postgres"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
	"github.com/darkroom-mcp/darkroom/storage/sqlite"
)

// The end-to-end tests run on the embedded engine, or on PostgreSQL when
// DARKROOM_TEST_ENGINE=postgres (CI runs both): every server a test
// starts then gets a fresh database of its own.
func onPostgres() bool { return os.Getenv("DARKROOM_TEST_ENGINE") == "postgres" }

// databaseURL is the database for a server on dataDir ("" on SQLite): a
// process restarted on the same directory finds its database again.
func databaseURL(t testing.TB, dataDir string) string {
	t.Helper()
	if !onPostgres() {
		return ""
	}
	return pgtest.URLFor(t, dataDir)
}

// queryInt reads one integer from the server's database, whichever
// engine it runs on (a query without parameters).
func queryInt(t *testing.T, s *testServer, query string) int {
	t.Helper()
	var n int
	var err error
	switch d := s.app.db.(type) {
	case *sqlite.DB:
		err = d.Read.QueryRow(query).Scan(&n)
	case *postgres.DB:
		err = d.Pool.QueryRow(context.Background(), query).Scan(&n)
	default:
		t.Fatalf("no query for engine %T", d)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}
