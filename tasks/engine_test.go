package tasks_test

import (
	"context"

	"github.com/darkroom-mcp/darkroom/storage/sqlite"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// The internal tests run on the embedded engine.
func init() {
	tasks.OpenTestEngine = func(path string) (tasks.TestEngine, error) {
		d, err := sqlite.Open(context.Background(), path)
		if err != nil {
			return nil, err
		}
		return testEngine{d}, nil
	}
}

type testEngine struct{ *sqlite.DB }

func (e testEngine) QueryInt(query string, args ...any) (n int, err error) {
	err = e.Read.QueryRow(query, args...).Scan(&n)
	return n, err
}
