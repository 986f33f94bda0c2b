package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	sqlfiles "github.com/darkroom-mcp/darkroom/sqlfiles"
)

// migrate applies the numbered schema files that are newer than the
// database's PRAGMA user_version, each in its own transaction.
//
// A small runner rather than goose: the whole job is "apply NNNN_*.sql in
// order, once", SQLite keeps the version in its header for free, and the
// same files feed sqlc; a library would add a version table and ~10
// transitive modules for no gain.
func migrate(ctx context.Context, db *sql.DB, files fs.FS, dir string) error {
	steps, err := sqlfiles.Migrations(files, dir)
	if err != nil {
		return err
	}
	var current int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	for _, s := range steps {
		if s.N <= current {
			continue
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.SQL); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migration %s: %w", s.Name, err)
		}
		// PRAGMA does not take bound parameters; N is an int we parsed.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", s.N)); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", s.Name, err)
		}
	}
	return nil
}
