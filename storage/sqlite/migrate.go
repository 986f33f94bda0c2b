package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// migrate applies the numbered schema files that are newer than the
// database's PRAGMA user_version, each in its own transaction.
//
// A small runner rather than goose: the whole job is "apply NNNN_*.sql in
// order, once", SQLite keeps the version in its header for free, and the
// same files feed sqlc; a library would add a version table and ~10
// transitive modules for no gain.
func migrate(ctx context.Context, db *sql.DB, files fs.FS, dir string) error {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return fmt.Errorf("read migrations: %w", err)
	}
	type step struct {
		n    int
		name string
	}
	var steps []step
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, _ := strings.Cut(e.Name(), "_")
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 {
			return fmt.Errorf("migration %s: name must start with a positive number", e.Name())
		}
		steps = append(steps, step{n, e.Name()})
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].n < steps[j].n })
	for i := 1; i < len(steps); i++ {
		if steps[i-1].n == steps[i].n {
			return fmt.Errorf("migrations %s and %s share number %d", steps[i-1].name, steps[i].name, steps[i].n)
		}
	}

	var current int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	for _, s := range steps {
		if s.n <= current {
			continue
		}
		body, err := fs.ReadFile(files, path.Join(dir, s.name))
		if err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migration %s: %w", s.name, err)
		}
		// PRAGMA does not take bound parameters; n is an int we parsed.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", s.n)); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", s.name, err)
		}
	}
	return nil
}
