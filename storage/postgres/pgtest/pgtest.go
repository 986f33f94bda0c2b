// Package pgtest gives tests a fresh, empty PostgreSQL database of their
// own on the server scripts/pg-test-server.sh starts
// (DARKROOM_TEST_DATABASE_URL). Without that server a test is skipped,
// unless DARKROOM_TEST_REQUIRE_PG is set (CI), when it fails.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// URL creates a database for t, dropped when t ends, and returns its URL.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("DARKROOM_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("DARKROOM_TEST_REQUIRE_PG") != "" {
			t.Fatal("DARKROOM_TEST_DATABASE_URL is not set: start scripts/pg-test-server.sh")
		}
		t.Skip("no PostgreSQL: start scripts/pg-test-server.sh and source its env file")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := "darkroom_test_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// byKey maps URLFor's keys to their databases.
var byKey sync.Map

// URLFor is URL once per key in the test process: a server restarted on
// the same data directory (the key) finds its database again. It is
// dropped when the test that created it ends.
func URLFor(t testing.TB, key string) string {
	t.Helper()
	if u, ok := byKey.Load(key); ok {
		return u.(string)
	}
	u := URL(t)
	byKey.Store(key, u)
	return u
}
