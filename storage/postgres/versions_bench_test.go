package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/darkroom-mcp/darkroom/tasks"
)

// BenchmarkTaskVersions is the task cache's resync on PostgreSQL: the
// versions of a replica's cached live tasks, read 10,000 ids a query
// (tasks.Store.Revalidate). It reports the cost per id, which is what a
// replica pays every resync for each task its polls or listen streams
// keep cached.
func BenchmarkTaskVersions(b *testing.B) {
	const n = 10_000
	ctx := context.Background()
	d := replicas(b, 1)[0]
	if _, err := d.Pool.Exec(ctx, `INSERT INTO tasks (task_id, owner, ref, status, created_at, last_updated_at, poll_interval_ms)
		SELECT 'bench-' || i, 'o', 'generation:' || i, 'working', 0, 0, 1000 FROM generate_series(1, $1::int) AS i`, n); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%d", i+1)
	}
	vr := d.Tasks().(tasks.VersionReader)
	b.ResetTimer()
	for b.Loop() {
		got, err := vr.TaskVersions(ctx, ids)
		if err != nil || len(got) != n {
			b.Fatalf("%d versions, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/id")
}
