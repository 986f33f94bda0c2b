package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	sqlfiles "github.com/darkroom-mcp/darkroom/sqlfiles"
	"github.com/darkroom-mcp/darkroom/storage/sqlite/sqlitedb"
	"modernc.org/sqlite"
)

// testTimeout bounds every wait on the writer, so a hang fails instead of
// stalling the suite.
const testTimeout = 30 * time.Second

func openDB(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "darkroom.db")
	d, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, path
}

// latestMigration is the highest NNNN of the embedded schema files.
func latestMigration(t *testing.T) int {
	t.Helper()
	entries, err := fs.ReadDir(sqlfiles.SQLiteSchema, "sqlite/schema")
	if err != nil {
		t.Fatal(err)
	}
	latest := 0
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		n, err := strconv.Atoi(num)
		if err != nil {
			t.Fatalf("migration %s: %v", e.Name(), err)
		}
		latest = max(latest, n)
	}
	if latest == 0 {
		t.Fatal("no migrations embedded")
	}
	return latest
}

func userVersion(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) int {
	t.Helper()
	var v int
	if err := q.QueryRowContext(context.Background(), "PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func genRow(id string) sqlitedb.InsertGenerationParams {
	return sqlitedb.InsertGenerationParams{
		ID: id, Owner: "alice", ModelID: "local-sketch", Provider: "local", Kind: "image",
		Prompt: "p " + id, Params: "{}", Credits: 1, Charged: 1, Status: "queued",
		StatusMessage: "queued", CreatedAt: 1, UpdatedAt: 1,
	}
}

func countRows(t *testing.T, d *DB, where string, args ...any) int {
	t.Helper()
	var n int
	if err := d.Read.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM generations "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMigrationsApplyOnceAndReopen(t *testing.T) {
	want := latestMigration(t)
	d, path := openDB(t)
	if v := userVersion(t, d.Read); v != want {
		t.Fatalf("user_version after first open = %d, want %d", v, want)
	}
	ctx := context.Background()
	if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error { return tx.q.InsertGeneration(ctx, genRow("keep")) }); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopening twice more must neither fail (a re-run CREATE TABLE would)
	// nor lose data.
	for i := range 2 {
		d2, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		if v := userVersion(t, d2.Read); v != want {
			t.Errorf("reopen %d: user_version = %d, want %d", i, v, want)
		}
		if n := countRows(t, d2, "WHERE id = 'keep'"); n != 1 {
			t.Errorf("reopen %d: row lost (count %d)", i, n)
		}
		if err := d2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrateRunner drives the runner with synthetic files: each step runs
// exactly once, in number order, and bad sets are refused.
func TestMigrateRunner(t *testing.T) {
	ctx := context.Background()
	good := fstest.MapFS{
		"m/0002_b.sql":   {Data: []byte("INSERT INTO log(step) VALUES (2);")},
		"m/0001_a.sql":   {Data: []byte("CREATE TABLE log(step INTEGER); INSERT INTO log(step) VALUES (1);")},
		"m/0010_c.sql":   {Data: []byte("INSERT INTO log(step) VALUES (10);")},
		"m/README.txt":   {Data: []byte("ignored")},
		"m/sub/0099.sql": {Data: []byte("this is a directory entry's child and is never read")},
	}
	cases := []struct {
		name    string
		files   fstest.MapFS
		wantErr string
	}{
		{"not numbered", fstest.MapFS{"m/init.sql": {Data: []byte("SELECT 1;")}}, "positive number"},
		{"zero", fstest.MapFS{"m/0000_x.sql": {Data: []byte("SELECT 1;")}}, "positive number"},
		{"duplicate number", fstest.MapFS{"m/0001_a.sql": {Data: []byte("SELECT 1;")}, "m/1_b.sql": {Data: []byte("SELECT 1;")}}, "share number"},
		{"bad sql", fstest.MapFS{"m/0001_a.sql": {Data: []byte("CREATE TABLE ok(x); THIS IS NOT SQL;")}}, "0001_a.sql"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			err = migrate(ctx, db, c.files, "m")
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("migrate = %v, want error mentioning %q", err, c.wantErr)
			}
			if v := userVersion(t, db); v != 0 {
				t.Fatalf("a refused migration set moved user_version to %d", v)
			}
			var n int
			_ = db.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE name = 'ok'").Scan(&n)
			if n != 0 {
				t.Fatal("a failed migration left its table behind")
			}
		})
	}
	t.Run("applies each step once", func(t *testing.T) {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		for range 3 {
			if err := migrate(ctx, db, good, "m"); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		rows, err := db.Query("SELECT step FROM log ORDER BY rowid")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s int
			_ = rows.Scan(&s)
			got = append(got, strconv.Itoa(s))
		}
		rows.Close()
		if strings.Join(got, ",") != "1,2,10" {
			t.Fatalf("steps applied = %v, want 1,2,10 exactly once", got)
		}
		if v := userVersion(t, db); v != 10 {
			t.Fatalf("user_version = %d, want 10", v)
		}
		// A new step appended later runs alone.
		more := fstest.MapFS{}
		for k, v := range good {
			more[k] = v
		}
		more["m/0011_d.sql"] = &fstest.MapFile{Data: []byte("INSERT INTO log(step) VALUES (11);")}
		if err := migrate(ctx, db, more, "m"); err != nil {
			t.Fatal(err)
		}
		var n int
		_ = db.QueryRow("SELECT COUNT(*) FROM log").Scan(&n)
		if n != 4 {
			t.Fatalf("log has %d rows after adding step 11, want 4", n)
		}
	})
}

func TestConcurrentCreators(t *testing.T) {
	d, _ := openDB(t)
	const writers, each = 32, 10
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("g-%02d-%02d", w, i)
				errs <- d.Write(ctx, func(ctx context.Context, tx *Tx) error { return tx.q.InsertGeneration(ctx, genRow(id)) })
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("write: %v", err)
		}
	}
	if n := countRows(t, d, ""); n != writers*each {
		t.Fatalf("rows = %d, want %d", n, writers*each)
	}
	for w := range writers {
		for i := range each {
			if n := countRows(t, d, "WHERE id = ?", fmt.Sprintf("g-%02d-%02d", w, i)); n != 1 {
				t.Fatalf("row g-%02d-%02d missing", w, i)
			}
		}
	}
}

// holdWriter parks the writer loop inside a write until the returned
// release is called, so that the writes queued meanwhile share one batch.
func holdWriter(t *testing.T, d *DB) (release func(), done <-chan error) {
	t.Helper()
	started, hold := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- d.Write(context.Background(), func(ctx context.Context, tx *Tx) error {
			close(started)
			<-hold
			return nil
		})
	}()
	<-started
	var once sync.Once
	return func() { once.Do(func() { close(hold) }) }, errc
}

// enqueue starts a Write in a goroutine and returns once it sits in the
// writer's queue, so batch order is the order of enqueue calls.
func enqueue(t *testing.T, d *DB, ctx context.Context, fn func(ctx context.Context, tx *Tx) error) <-chan error {
	t.Helper()
	before := len(d.reqs)
	errc := make(chan error, 1)
	go func() { errc <- d.Write(ctx, fn) }()
	deadline := time.Now().Add(testTimeout)
	for len(d.reqs) <= before {
		if time.Now().After(deadline) {
			t.Fatal("write never reached the queue")
		}
		runtime.Gosched()
	}
	return errc
}

func recv(t *testing.T, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(testTimeout):
		t.Fatal("write did not return")
		return nil
	}
}

var errBoom = errors.New("boom")

// TestFailingWriteInBatch: a write that fails after changing rows is
// rolled back; its batch mates commit together, wherever the failure sits
// in the batch.
func TestFailingWriteInBatch(t *testing.T) {
	for _, pos := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("failure at %d", pos), func(t *testing.T) {
			d, _ := openDB(t)
			release, held := holdWriter(t, d)
			var txs sync.Map // write -> the *Tx of its last run
			var failingRuns atomic.Int32
			const n = 4
			errcs := make([]<-chan error, n)
			for i := range n {
				id := fmt.Sprintf("w%d", i)
				errcs[i] = enqueue(t, d, context.Background(), func(ctx context.Context, tx *Tx) error {
					txs.Store(i, tx)
					if err := tx.q.InsertGeneration(ctx, genRow(id)); err != nil {
						return err
					}
					if i == pos {
						failingRuns.Add(1)
						// A second change, then failure: both must vanish.
						if _, err := tx.tx.ExecContext(ctx, "UPDATE generations SET prompt = 'clobbered'"); err != nil {
							return err
						}
						return errBoom
					}
					return nil
				})
			}
			release()
			if err := recv(t, held); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				err := recv(t, errcs[i])
				if i == pos && !errors.Is(err, errBoom) {
					t.Errorf("failing write returned %v, want errBoom", err)
				}
				if i != pos && err != nil {
					t.Errorf("write %d returned %v", i, err)
				}
			}
			committed := map[any]bool{} // the transactions the good writes last ran in
			txs.Range(func(i, tx any) bool {
				if i != pos {
					committed[tx] = true
				}
				return true
			})
			if r := failingRuns.Load(); r != 1 {
				t.Errorf("the failing write ran %d times, want once", r)
			}
			if len(committed) != 1 {
				t.Fatalf("the %d good writes committed in %d transactions, want 1 batch", n-1, len(committed))
			}
			if c := countRows(t, d, ""); c != n-1 {
				t.Fatalf("rows = %d, want %d", c, n-1)
			}
			if c := countRows(t, d, "WHERE id = ?", fmt.Sprintf("w%d", pos)); c != 0 {
				t.Fatal("the failing write's row was committed")
			}
			if c := countRows(t, d, "WHERE prompt = 'clobbered'"); c != 0 {
				t.Fatalf("the failing write's update survived on %d rows", c)
			}
		})
	}
}

func TestSingleFailingWriteRollsBack(t *testing.T) {
	d, _ := openDB(t)
	err := d.Write(context.Background(), func(ctx context.Context, tx *Tx) error {
		if err := tx.q.InsertGeneration(ctx, genRow("solo")); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Write = %v, want errBoom", err)
	}
	if c := countRows(t, d, ""); c != 0 {
		t.Fatalf("rows = %d after a failed write", c)
	}
	// The writer is still healthy.
	if err := d.Write(context.Background(), func(ctx context.Context, tx *Tx) error { return tx.q.InsertGeneration(ctx, genRow("after")) }); err != nil {
		t.Fatal(err)
	}
}

// TestCancelledBeforeTurn: a write whose context ends while it waits in
// the queue is not run, and says so.
func TestCancelledBeforeTurn(t *testing.T) {
	d, _ := openDB(t)
	release, held := holdWriter(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	ran := atomic.Bool{}
	errc := enqueue(t, d, ctx, func(ctx context.Context, tx *Tx) error {
		ran.Store(true)
		return tx.q.InsertGeneration(ctx, genRow("late"))
	})
	other := enqueue(t, d, context.Background(), func(ctx context.Context, tx *Tx) error {
		return tx.q.InsertGeneration(ctx, genRow("other"))
	})
	cancel()
	release()
	_ = recv(t, held)
	if err := recv(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write returned %v", err)
	}
	if err := recv(t, other); err != nil {
		t.Fatal(err)
	}
	if ran.Load() || countRows(t, d, "WHERE id = 'late'") != 0 {
		t.Fatal("a write cancelled before its turn ran")
	}
	if countRows(t, d, "WHERE id = 'other'") != 1 {
		t.Fatal("its batch mate was lost")
	}
}

type gate struct {
	running chan struct{}   // closed once the statement is executing
	proceed <-chan struct{} // the statement continues once this closes
}

var (
	registerOnce sync.Once
	stmtGate     atomic.Pointer[gate]
)

// registerGate adds test_gate(): the first call after a gate is armed
// reports that its statement is executing and blocks until proceed.
func registerGate(t *testing.T) {
	registerOnce.Do(func() {
		fn := func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
			if g := stmtGate.Swap(nil); g != nil {
				close(g.running)
				<-g.proceed
			}
			return int64(1), nil
		}
		if err := sqlite.RegisterScalarFunction("test_gate", 0, fn); err != nil {
			t.Fatal(err)
		}
		// The writer's connections come from a driver of their own.
		testDriver = func(drv *sqlite.Driver) { drv.MustRegisterScalarFunction("test_gate", 0, fn) }
	})
}

// TestCallerGoneMidWriteSparesBatchMates: a caller whose context ends
// while its write function is executing a statement (an HTTP client that
// disconnects) may lose its own write, but its batch mates must commit,
// and every write's reported outcome must match what is on disk (no write
// may run outside the transaction).
func TestCallerGoneMidWriteSparesBatchMates(t *testing.T) {
	registerGate(t)
	d, _ := openDB(t)
	ctx := context.Background()
	if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error {
		_, err := tx.tx.ExecContext(ctx, "CREATE TABLE side(n INTEGER)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	release, held := holdWriter(t, d)
	first := enqueue(t, d, ctx, func(ctx context.Context, tx *Tx) error { return tx.q.InsertGeneration(ctx, genRow("before")) })
	gone, hangUp := context.WithCancel(ctx)
	defer hangUp()
	g := &gate{running: make(chan struct{}), proceed: gone.Done()}
	stmtGate.Store(g)
	slow := enqueue(t, d, gone, func(ctx context.Context, tx *Tx) error {
		// A write statement that is still executing when its caller leaves:
		// the gate holds it until then, 50k more rows follow.
		_, err := tx.tx.ExecContext(ctx, `INSERT INTO side(n)
			WITH RECURSIVE c(x) AS (SELECT test_gate() UNION ALL SELECT x+1 FROM c WHERE x < 50000)
			SELECT count(*) FROM c`)
		return err
	})
	last := enqueue(t, d, ctx, func(ctx context.Context, tx *Tx) error {
		if err := tx.q.InsertGeneration(ctx, genRow("after")); err != nil {
			return err
		}
		// A second statement: both or neither must persist.
		_, err := tx.tx.ExecContext(ctx, "UPDATE generations SET prompt = 'after-2' WHERE id = 'after'")
		return err
	})
	release()
	_ = recv(t, held)
	select {
	case <-g.running:
	case <-time.After(testTimeout):
		t.Fatal("the slow statement never started")
	}
	hangUp() // the caller goes away mid-statement
	errFirst, errSlow, errLast := recv(t, first), recv(t, slow), recv(t, last)
	if errFirst != nil || errLast != nil {
		t.Errorf("batch mates of an interrupted write failed: before=%v after=%v", errFirst, errLast)
	}
	before, after := countRows(t, d, "WHERE id = 'before'"), countRows(t, d, "WHERE id = 'after'")
	if before != 1 || after != 1 {
		t.Errorf("rows committed: before=%d after=%d, want 1 and 1", before, after)
	}
	// A write reported failed must not have persisted; one reported
	// successful must have.
	if errFirst != nil && before != 0 {
		t.Errorf("write 'before' reported %v but its row persisted", errFirst)
	}
	if errLast != nil && after != 0 {
		t.Errorf("write 'after' reported %v but its row persisted (outside any transaction)", errLast)
	}
	var side int
	_ = d.Read.QueryRow("SELECT COUNT(*) FROM side").Scan(&side)
	if (errSlow == nil) != (side == 1) {
		t.Errorf("interrupted write reported %v with %d side rows", errSlow, side)
	}
	// The writer still works afterwards.
	if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error { return tx.q.InsertGeneration(ctx, genRow("later")) }); err != nil {
		t.Fatalf("write after the interrupted batch: %v", err)
	}
}

// TestAbortedTransactionReportsHonestly: some SQLite errors (SQLITE_FULL
// on a statement without a statement journal, I/O errors) roll back the
// whole transaction, not just the failing write's changes. Batch mates
// may then fail too, but every write's reported outcome must match the
// disk: none may run, unprotected, in autocommit mode after the rollback.
func TestAbortedTransactionReportsHonestly(t *testing.T) {
	d, _ := openDB(t)
	ctx := context.Background()
	release, held := holdWriter(t, d)
	first := enqueue(t, d, ctx, func(ctx context.Context, tx *Tx) error { return tx.q.InsertGeneration(ctx, genRow("before")) })
	full := enqueue(t, d, ctx, func(ctx context.Context, tx *Tx) error {
		// A disk that is full: no page may be added to the file.
		var pages int
		if err := tx.tx.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
			return err
		}
		if _, err := tx.tx.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
			return err
		}
		r := genRow("huge")
		r.Prompt = strings.Repeat("x", 4<<20)
		err := tx.q.InsertGeneration(ctx, r)
		_, _ = tx.tx.ExecContext(ctx, "PRAGMA max_page_count = 1073741823")
		if err == nil {
			return errors.New("test setup: insert into a full database succeeded")
		}
		return err
	})
	last := enqueue(t, d, ctx, func(ctx context.Context, tx *Tx) error {
		if err := tx.q.InsertGeneration(ctx, genRow("after")); err != nil {
			return err
		}
		_, err := tx.tx.ExecContext(ctx, "UPDATE generations SET prompt = 'after-2' WHERE id = 'after'")
		return err
	})
	release()
	_ = recv(t, held)
	errFirst, errFull, errLast := recv(t, first), recv(t, full), recv(t, last)
	if errFull == nil {
		t.Fatal("the write into a full database reported success")
	}
	if strings.Contains(errFull.Error(), "test setup") {
		t.Skip(errFull)
	}
	for _, c := range []struct {
		id  string
		err error
	}{{"before", errFirst}, {"after", errLast}} {
		n := countRows(t, d, "WHERE id = ?", c.id)
		if (c.err == nil) != (n == 1) {
			t.Errorf("write %q reported %v but %d row(s) are on disk", c.id, c.err, n)
		}
	}
	if n := countRows(t, d, "WHERE id = 'huge'"); n != 0 {
		t.Error("the failed write persisted")
	}
	if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error { return tx.q.InsertGeneration(ctx, genRow("later")) }); err != nil {
		t.Fatalf("write after the aborted batch: %v", err)
	}
}

func TestCloseFailsLaterWrites(t *testing.T) {
	d, _ := openDB(t)
	ctx := context.Background()
	if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error { return tx.q.InsertGeneration(ctx, genRow("a")) }); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	ran := false
	for range 3 {
		err := d.Write(ctx, func(ctx context.Context, tx *Tx) error { ran = true; return nil })
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Write after Close = %v, want ErrClosed", err)
		}
	}
	if ran {
		t.Fatal("a write ran after Close")
	}
}

// TestCloseRacingWrites: writes racing Close either commit (and say so) or
// fail with ErrClosed; none hangs and none is reported committed but lost.
func TestCloseRacingWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "race.db")
	d, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	var wg sync.WaitGroup
	ok := make(chan string, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			id := fmt.Sprintf("r%02d", i)
			err := d.Write(context.Background(), func(ctx context.Context, tx *Tx) error { return tx.q.InsertGeneration(ctx, genRow(id)) })
			switch {
			case err == nil:
				ok <- id
			case !errors.Is(err, ErrClosed):
				t.Errorf("write %s: %v", id, err)
			}
		})
	}
	close(start)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(ok)
	d2, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	committed := 0
	for id := range ok {
		committed++
		if countRows(t, d2, "WHERE id = ?", id) != 1 {
			t.Errorf("write %s reported committed but is missing", id)
		}
	}
	if total := countRows(t, d2, ""); total != committed {
		t.Errorf("%d rows on disk but %d writes reported committed", total, committed)
	}
}

// TestEveryOutcomeMatchesTheDisk: many concurrent writes, some failing
// after they changed rows, share batches that are rolled back and run
// again; each write's reported outcome must match what is on disk, and a
// rerun must not apply a write twice.
func TestEveryOutcomeMatchesTheDisk(t *testing.T) {
	d, _ := openDB(t)
	const n = 600
	errs := make([]error, n)
	if err := d.Write(context.Background(), func(ctx context.Context, tx *Tx) error { return tx.q.InsertGeneration(ctx, genRow("counter")) }); err != nil {
		t.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				id := fmt.Sprintf("w%03d", i)
				errs[i] = d.Write(context.Background(), func(ctx context.Context, tx *Tx) error {
					if err := tx.q.InsertGeneration(ctx, genRow(id)); err != nil {
						return err
					}
					// Every write also bumps a shared counter row: a write
					// applied twice would show in the total.
					if _, err := tx.tx.ExecContext(ctx, "UPDATE generations SET attempts = attempts + 1 WHERE id = 'counter'"); err != nil {
						return err
					}
					if i%7 == 3 {
						return errBoom
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		want := i%7 != 3
		if (err == nil) != want {
			t.Errorf("write %d returned %v", i, err)
		}
		if got := countRows(t, d, "WHERE id = ?", fmt.Sprintf("w%03d", i)) == 1; got != (err == nil) {
			t.Errorf("write %d reported %v but its row on disk: %v", i, err, got)
		}
		if err == nil {
			ok++
		}
	}
	var bumps int
	if err := d.Read.QueryRow("SELECT attempts FROM generations WHERE id = 'counter'").Scan(&bumps); err != nil {
		t.Fatal(err)
	}
	if bumps != ok {
		t.Fatalf("the counter was bumped %d times by %d committed writes", bumps, ok)
	}
}
