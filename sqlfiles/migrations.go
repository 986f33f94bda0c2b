package sqlfiles

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema file, NNNN_name.sql.
type Migration struct {
	N    int
	Name string
	SQL  string
}

// Migrations reads dir's schema files in number order; a name without a
// positive number, or two files with one number, is an error. Each engine
// applies those newer than the version it records.
func Migrations(files fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, _ := strings.Cut(e.Name(), "_")
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number", e.Name())
		}
		body, err := fs.ReadFile(files, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{N: n, Name: e.Name(), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].N < out[j].N })
	for i := 1; i < len(out); i++ {
		if out[i-1].N == out[i].N {
			return nil, fmt.Errorf("migrations %s and %s share number %d", out[i-1].Name, out[i].Name, out[i].N)
		}
	}
	return out, nil
}
