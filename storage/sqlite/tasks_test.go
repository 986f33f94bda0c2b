package sqlite

import (
	"strings"
	"testing"
)

// TestOwnedTaskPlan: GetOwnedTask finds (task_id, owner) in one index, so
// a foreign id misses in the index exactly as an unknown id does and no
// table row is read for it (tasks/get's no-existence-tell relies on it;
// BenchmarkLookupTell in tasks measures it).
func TestOwnedTaskPlan(t *testing.T) {
	d, _ := openDB(t)
	rows, err := d.Read.QueryContext(t.Context(), "EXPLAIN QUERY PLAN SELECT * FROM tasks WHERE task_id = ?1 AND owner = ?2", "t", "o")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || !strings.Contains(plan[0], "(task_id=? AND owner=?)") {
		t.Fatalf("plan %q: want one search on an index of task_id and owner", plan)
	}
}
