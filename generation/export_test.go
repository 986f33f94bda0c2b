package generation

// TestEngine is a real engine for this package's tests, opened by the
// external test package (engine_test.go), which may import an engine:
// this package's own tests cannot, since engines import generation.
type TestEngine interface {
	Generations() Store
	// Exec runs a statement in a write transaction (test set-up).
	Exec(query string, args ...any) error
	// QueryInt reads one integer.
	QueryInt(query string, args ...any) (int, error)
	Close() error
}

// OpenTestEngine opens a fresh engine at path.
var OpenTestEngine func(path string) (TestEngine, error)
