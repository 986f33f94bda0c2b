package main

import (
	"os"
	"sync"
	"testing"

	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
)

// The end-to-end tests run on the embedded engine, or on PostgreSQL when
// DARKROOM_TEST_ENGINE=postgres (CI runs both): every server a test
// starts then gets a fresh database of its own.
func onPostgres() bool { return os.Getenv("DARKROOM_TEST_ENGINE") == "postgres" }

// databases maps a data directory to its database, so that a process
// restarted on the same directory finds its database again.
var databases sync.Map

// databaseURL is the database for a server on dataDir ("" on SQLite).
func databaseURL(t *testing.T, dataDir string) string {
	t.Helper()
	if !onPostgres() {
		return ""
	}
	if u, ok := databases.Load(dataDir); ok {
		return u.(string)
	}
	u := pgtest.URL(t)
	databases.Store(dataDir, u)
	return u
}
