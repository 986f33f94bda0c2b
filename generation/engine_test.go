package generation_test

import (
	"context"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/sqlite"
)

// The internal tests run on the embedded engine.
func init() {
	generation.OpenTestEngine = func(path string) (generation.TestEngine, error) {
		d, err := sqlite.Open(context.Background(), path)
		if err != nil {
			return nil, err
		}
		return testEngine{d}, nil
	}
}

type testEngine struct{ *sqlite.DB }

func (e testEngine) Exec(query string, args ...any) error {
	return e.Write(context.Background(), func(ctx context.Context, tx *sqlite.Tx) error {
		_, err := tx.Exec(ctx, query, args...)
		return err
	})
}

func (e testEngine) QueryInt(query string, args ...any) (n int, err error) {
	err = e.Read.QueryRow(query, args...).Scan(&n)
	return n, err
}
