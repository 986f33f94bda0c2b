package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/postgres"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
	"github.com/jackc/pgx/v5"
)

// sharedDatabase returns a setting that puts servers on one fresh
// PostgreSQL database, as replicas of one deployment (skipped without
// PostgreSQL).
func sharedDatabase(tb testing.TB) func(*config) {
	url := pgtest.URL(tb)
	return func(c *config) { c.DatabaseURL = url }
}

// sharedDatabaseURL is a fresh PostgreSQL database's URL (skipped without
// PostgreSQL).
func sharedDatabaseURL(tb testing.TB) string { return pgtest.URL(tb) }

// listening waits until s's cross-replica listener is connected and
// returns its backend pid; other than old when given.
func listening(tb testing.TB, s *testServer, old uint32) uint32 {
	tb.Helper()
	pg := s.app.db.(*postgres.DB)
	var pid uint32
	eventually(tb, 10*time.Second, func() bool { pid = pg.ListenerPID(); return pid != 0 && pid != old }, "the listener to connect")
	return pid
}

// TestReplicaWakeups: a change committed through replica A wakes a
// wait_generation (Service.Wait) and a subscriptions/listen stream on
// replica B: at once through NOTIFY, also after B's listener connection
// was killed (it reconnects), and within the resync period when the
// notification was lost (here: a change written with no NOTIFY at all).
func TestReplicaWakeups(t *testing.T) {
	shared := sharedDatabase(t)
	a, b := startServer(t, 1, shared), startServer(t, 1, shared)
	pidB := listening(t, b, 0)
	ctx := context.Background()
	hc := &http.Client{}
	for _, tc := range []struct {
		name   string
		before func(t *testing.T)
		change func(t *testing.T, genID, taskID string)
		within time.Duration
	}{
		{"notified", nil, func(t *testing.T, genID, _ string) {
			if _, out, err := a.app.svc.CancelByID(ctx, genID); err != nil || out != generation.CancelDone {
				t.Fatalf("cancel on A: %v %v", out, err)
			}
		}, time.Second},
		{"after the listener connection was killed", func(t *testing.T) {
			if n := queryInt(t, a, "SELECT count(*) FROM pg_stat_activity WHERE pid = "+itoa(pidB)); n != 1 {
				t.Fatalf("listener backend %d not found", pidB)
			}
			_ = queryInt(t, a, "SELECT pg_terminate_backend("+itoa(pidB)+")::int")
			pidB = listening(t, b, pidB)
		}, func(t *testing.T, genID, _ string) {
			if _, out, err := a.app.svc.CancelByID(ctx, genID); err != nil || out != generation.CancelDone {
				t.Fatalf("cancel on A: %v %v", out, err)
			}
		}, time.Second},
		{"lost notification: made up by the resync", nil, func(t *testing.T, genID, taskID string) {
			pg := a.app.db.(*postgres.DB)
			if _, err := pg.Pool.Exec(ctx, `UPDATE generations SET status = 'cancelled', updated_at = updated_at + 1 WHERE id = $1`, genID); err != nil {
				t.Fatal(err)
			}
			if _, err := pg.Pool.Exec(ctx, `UPDATE tasks SET status = 'cancelled', last_updated_at = last_updated_at + 1 WHERE task_id = $1`, taskID); err != nil {
				t.Fatal(err)
			}
		}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			gens, ids := reservedTasks(t, a.app, 1)
			waited := make(chan *generation.Generation, 1)
			go func() {
				g, _, err := b.app.svc.Wait(ctx, "local", gens[0], 30*time.Second)
				if err != nil {
					t.Error(err)
				}
				waited <- g
			}()
			ls := openListen(t, hc, b.url, ids[0])
			<-ls.ready
			waitWatching(t, b, 1)
			t0 := time.Now()
			tc.change(t, gens[0], ids[0])
			timeout := time.After(tc.within)
			select {
			case g := <-waited:
				if g == nil || g.Status != generation.StatusCancelled {
					t.Fatalf("wait on B returned %+v", g)
				}
			case <-timeout:
				t.Fatalf("wait_generation on B not woken within %v", tc.within)
			}
			select {
			case <-ls.cancelled:
			case <-timeout:
				t.Fatalf("listen stream on B not notified within %v", tc.within)
			}
			t.Logf("woken after %v", time.Since(t0))
		})
	}
}

// waitWatching waits until n waits are watching on s's hub, so that a
// change made next must wake them (not be read by their first look).
func waitWatching(tb testing.TB, s *testServer, n int) {
	tb.Helper()
	eventually(tb, 10*time.Second, func() bool { return s.app.svc.Hub().Waiting() >= n }, "the wait to start watching")
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// BenchmarkReplicaWakeup: three replicas on one PostgreSQL. Each round a
// generation held on replica A is cancelled there while replicas B and C
// wait on it (wait_generation's Service.Wait); reported is the time from
// just before the cancel to each remote wait returning: commit, NOTIFY,
// listener, hub, re-read. Skipped without PostgreSQL.
func BenchmarkReplicaWakeup(b *testing.B) {
	const rounds = 300
	shared := sharedDatabase(b)
	rs := make([]*testServer, 3)
	for i := range rs {
		rs[i] = startBenchServer(b, 1, true, nil, shared)
	}
	for _, r := range rs[1:] {
		listening(b, r, 0)
	}
	ctx := context.Background()
	hideNsPerOp(b)
	var lats []time.Duration
	for range b.N {
		gens, _ := reservedTasks(b, rs[0].app, rounds)
		lats = lats[:0]
		for _, id := range gens {
			done := make(chan time.Time, 2)
			for _, r := range rs[1:] {
				go func() {
					if _, _, err := r.app.svc.Wait(ctx, "local", id, 30*time.Second); err != nil {
						b.Error(err)
					}
					done <- time.Now()
				}()
			}
			for _, r := range rs[1:] {
				waitWatching(b, r, 1)
			}
			t0 := time.Now()
			if _, out, err := rs[0].app.svc.CancelByID(ctx, id); err != nil || out != generation.CancelDone {
				b.Fatalf("cancel: %v %v", out, err)
			}
			for range 2 {
				lats = append(lats, (<-done).Sub(t0))
			}
		}
	}
	s := sortedDurations(lats)
	b.ReportMetric(pct(s, 0.50), "p50_ms")
	b.ReportMetric(pct(s, 0.99), "p99_ms")
	b.ReportMetric(3, "replicas")
}

// TestSlowSubmitOneProviderJob: three replicas on one PostgreSQL with a
// 2 s lease; a provider submit is held at the emulator for several
// leases. The replica stepping it renews its lease, so no other replica
// takes the generation over and reconciles (finding no job yet) into a
// second submit: exactly one create call and one provider job per
// provider, counted by the emulator.
func TestSlowSubmitOneProviderJob(t *testing.T) {
	const lease = 2 * time.Second
	for _, pm := range providerModels {
		t.Run(pm.name, func(t *testing.T) {
			shared := sharedDatabase(t)
			rig := startEmulator(t, defaultTiming)
			short := func(c *config) { c.RunnerLease = lease }
			a := providerServer(t, rig, false, shared, short)
			providerServer(t, rig, false, shared, short)
			providerServer(t, rig, false, shared, short)
			rig.Inject(emulator.Rule{Provider: pm.name, Op: emulator.OpCreate, Fault: emulator.FaultSlow, Times: 1})
			cs := connect(t, a.url, "2026-07-28")
			var g genView
			call(t, cs, "generate", map[string]any{"modelId": pm.fast, "prompt": "a slow submit"}, &g)
			select {
			case <-rig.SlowHits():
			case <-time.After(10 * time.Second):
				t.Fatal("no replica submitted")
			}
			holder := generationRow(t, a, g.GenerationID).LeaseOwner
			// The submit is held for 3.5 leases: what is tested is that
			// nothing happens meanwhile, so this waits out wall time.
			<-time.After(7 * lease / 2)
			row := generationRow(t, a, g.GenerationID)
			if row.LeaseOwner != holder || !row.LeaseUntil.After(time.Now()) {
				t.Errorf("%s into a held submit: lease %q until %v, taken by %q at first", 7*lease/2, row.LeaseOwner, row.LeaseUntil, holder)
			}
			rig.Release()
			var w genView
			call(t, cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 30}, &w)
			if w.Status != "completed" {
				t.Fatalf("ended %s (%s)", w.Status, w.StatusMessage)
			}
			if creates, jobs := rig.Count(pm.name, emulator.OpCreate), rig.Jobs(pm.name); creates != 1 || jobs != 1 {
				t.Fatalf("%d create calls, %d provider jobs; want 1 and 1", creates, jobs)
			}
		})
	}
}

// ownPostgres starts a PostgreSQL of the test's own (scripts/pg-test-server.sh
// with its own state folder), for a test that takes it down; it returns
// the database URL and a function running the script's other commands
// (pause, resume) on it. It skips where the shared test server is not
// configured (no PostgreSQL here).
func ownPostgres(t testing.TB, env ...string) (string, func(cmd string)) {
	t.Helper()
	if os.Getenv("DARKROOM_TEST_DATABASE_URL") == "" {
		if os.Getenv("DARKROOM_TEST_REQUIRE_PG") != "" {
			t.Fatal("no PostgreSQL: DARKROOM_TEST_DATABASE_URL is not set")
		}
		t.Skip("no PostgreSQL: start scripts/pg-test-server.sh and source its env file")
	}
	// Under /tmp, not t.TempDir(): the server runs as the postgres user,
	// who must reach the folder.
	state, err := os.MkdirTemp("", "darkroom-pg-restart-")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("../../scripts/pg-test-server.sh")
	run := func(cmd string) []byte {
		c := exec.Command(script, cmd)
		c.Env = append(append(os.Environ(), env...), "DARKROOM_PG_STATE="+state)
		out, err := c.Output()
		if err != nil {
			t.Fatalf("pg-test-server.sh %s: %v %s", cmd, err, stderrOf(err))
		}
		return out
	}
	t.Cleanup(func() { run("stop") })
	envFile, err := os.ReadFile(strings.TrimSpace(string(run("start"))))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(envFile), "\n") {
		if u, ok := strings.CutPrefix(line, "export DARKROOM_TEST_DATABASE_URL="); ok {
			return u, func(cmd string) { run(cmd) }
		}
	}
	t.Fatalf("no database URL in %s", envFile)
	return "", nil
}

// TestDatabaseRestart: while PostgreSQL is down a replica fails /readyz
// (so the balancer takes it out); when it is back the replica is ready
// again by itself, and a generation created before the outage completes.
func TestDatabaseRestart(t *testing.T) {
	if onPostgres() {
		t.Skip("engine-independent: runs in the default pass")
	}
	url, pg := ownPostgres(t)
	var backingOff atomic.Bool
	log := slog.New(flagOn{msg: "runner: database writes fail; backing off", flag: &backingOff})
	s := startServerLog(t, log, 0.2, func(c *config) { c.DatabaseURL = url }) // a video takes about 4 s
	readyWithin := func(want int, within time.Duration) time.Duration {
		t.Helper()
		t0 := time.Now()
		for {
			code, checks := readyz(t, s.url)
			if code == want {
				return time.Since(t0)
			}
			if time.Since(t0) > within {
				t.Fatalf("/readyz still %d (%v) %v after the change, want %d", code, checks, within, want)
			}
			time.Sleep(50 * time.Millisecond) // polling a probe: no event to await
		}
	}
	readyWithin(200, 10*time.Second)
	cs := connect(t, s.url, "2026-07-28")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-motion", "prompt": "through a database restart"}, &g)
	pg("pause")
	down := readyWithin(503, 10*time.Second)
	if _, checks := readyz(t, s.url); checks["store"] == "ok" {
		t.Fatalf("not ready, but the store check passes: %v", checks)
	}
	// The outage lasts until the runner and the listener have met it.
	listener := s.app.db.(*postgres.DB)
	t1 := time.Now()
	eventually(t, 20*time.Second, func() bool { return backingOff.Load() && listener.ListenerPID() == 0 },
		"the runner to back off and the listener to drop")
	met := time.Since(t1)
	pg("resume")
	up := readyWithin(200, 30*time.Second)
	t.Logf("/readyz 503 %v after PostgreSQL stopped; runner and listener met the outage %v later; 200 again %v after it restarted",
		down.Round(time.Millisecond), met.Round(time.Millisecond), up.Round(time.Millisecond))
	var w genView
	call(t, cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 45}, &w)
	if w.Status != "completed" {
		t.Fatalf("the generation created before the restart ended %s (%s)", w.Status, w.StatusMessage)
	}
}

// flagOn is a log handler that sets flag when a record says msg.
type flagOn struct {
	msg  string
	flag *atomic.Bool
}

func (h flagOn) Enabled(context.Context, slog.Level) bool { return true }
func (h flagOn) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h flagOn) WithGroup(string) slog.Handler            { return h }
func (h flagOn) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.flag.Store(true)
	}
	return nil
}

// pgInsertBaseline inserts one row of about a generation's size per
// autocommit on a single connection for d: each commit waits for its own
// WAL flush. It returns rows per second.
func pgInsertBaseline(tb testing.TB, url string, d time.Duration) float64 {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS anchor_rows (id BIGSERIAL PRIMARY KEY, owner TEXT, model TEXT, prompt TEXT,
		status TEXT, credits BIGINT, charged BIGINT, progress DOUBLE PRECISION, created TEXT, token BYTEA)`); err != nil {
		tb.Fatal(err)
	}
	token := make([]byte, 16)
	n := 0
	t0 := time.Now()
	for time.Since(t0) < d {
		if _, err := conn.Exec(ctx, "INSERT INTO anchor_rows (owner, model, prompt, status, credits, charged, progress, created, token) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)",
			"local", "local-sketch", "a durable insert of about the size of a generation row", "queued", 1, 1, 0.0, time.Now().UTC().Format(time.RFC3339Nano), token); err != nil {
			tb.Fatal(err)
		}
		n++
	}
	return float64(n) / time.Since(t0).Seconds()
}

// ownersCreates is serviceCreates with each goroutine its own caller.
func ownersCreates(tb testing.TB, a *app, conc int, d time.Duration) float64 {
	return createLoop(tb, a, conc, d, func(w int) string { return "bench-" + strconv.Itoa(w) })
}

// BenchmarkPostgresDurableCreate: tools/call generate answered with a
// CreateTaskResult (generation and task rows committed before the reply)
// from 32 concurrent clients in a child process, on a PostgreSQL of the
// benchmark's own with fsync and synchronous_commit on, against a
// single-connection single-row INSERT loop into the same PostgreSQL, in
// one run (2 s each, twice). For attribution: the same creation
// in-process from 32 goroutines of one caller (each transaction locks the
// caller: budget, idempotency) and of 32 callers.
func BenchmarkPostgresDurableCreate(b *testing.B) {
	const conc = 32
	url, _ := ownPostgres(b, "DARKROOM_PG_FSYNC=on")
	s := startBenchServer(b, 1, false, nil, func(c *config) { c.DatabaseURL = url })
	pg := s.app.db.(*postgres.DB)
	for _, setting := range []string{"fsync", "synchronous_commit"} {
		var v string
		if err := pg.Pool.QueryRow(context.Background(), "SHOW "+setting).Scan(&v); err != nil || v != "on" {
			b.Fatalf("%s = %q (%v), want on", setting, v, err)
		}
	}
	caps := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	body := rpcBody(3, "tools/call", map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": "durable"}}, caps)
	spec := loadSpec{URL: s.url + "/mcp", Concurrency: conc, Warmup: 300 * time.Millisecond, Duration: 2 * time.Second,
		Headers: rpcHeaders("tools/call", "generate", ""), Body: body, Expect: `"resultType":"task"`}
	var reqs, total, errs int
	var secs float64
	var cpu time.Duration
	var anchor, oneOwner, owners []float64
	var errSample string
	hideNsPerOp(b)
	for range b.N {
		for range 2 {
			anchor = append(anchor, pgInsertBaseline(b, url, 2*time.Second))
			res, c := loadFromChild(b, spec)
			reqs, total, errs, secs, cpu = reqs+res.Measured, total+res.Total, errs+res.Errors, secs+res.Elapsed.Seconds(), cpu+c
			if errSample == "" {
				errSample = res.ErrSample
			}
			oneOwner = append(oneOwner, serviceCreates(b, s.app, conc, 2*time.Second))
			owners = append(owners, ownersCreates(b, s.app, conc, 2*time.Second))
		}
	}
	if errs > 0 {
		b.Errorf("%d failed creates: %s", errs, errSample)
	}
	mean := func(v []float64) float64 {
		t := 0.0
		for _, x := range v {
			t += x
		}
		return t / float64(len(v))
	}
	rate := float64(reqs) / secs
	b.ReportMetric(rate, "http_creates/s")
	b.ReportMetric(mean(anchor), "insert_loop_rows/s")
	b.ReportMetric(rate/mean(anchor), "ratio")
	b.ReportMetric(mean(oneOwner), "inproc_one_caller_creates/s")
	b.ReportMetric(mean(owners), "inproc_32_callers_creates/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(total), "server_cpu_us/create")
}

// rtProxy forwards TCP to PostgreSQL and counts round trips: each time a
// connection's client sends after having last received (a request after
// the previous answer) is one.
type rtProxy struct {
	ln    net.Listener
	trips atomic.Int64
}

func startRTProxy(tb testing.TB, target string) *rtProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &rtProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	tb.Cleanup(func() { ln.Close() })
	return p
}

func (p *rtProxy) serve(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	var answered atomic.Bool // the server spoke since the client last did
	answered.Store(true)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				answered.Store(true)
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				c.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if answered.Swap(false) {
				p.trips.Add(1)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// BenchmarkEngineOps: per-operation server CPU and database round trips,
// SQLite against PostgreSQL on this machine (the runner and heartbeat
// stopped, so only the requests touch the database): tasks/get of a
// working task and get_generation of a queued generation (2026-07-28,
// lean path) from 32 clients, and tools/call generate (a task) from 32
// clients, in a child process, 2 s each. PostgreSQL runs twice: without
// its listener, so its fence is never fresh and a live task is always
// read from the database (the rule before the fence: "pg_nofence"), and
// with it ("pg"). PostgreSQL is the shared test server, reached through a
// proxy counting round trips. server_cpu is darkroom's process only
// (PostgreSQL's own CPU is not in it).
func BenchmarkEngineOps(b *testing.B) {
	pgURL := sharedDatabaseURL(b)
	u, err := neturl.Parse(pgURL)
	if err != nil {
		b.Fatal(err)
	}
	proxy := startRTProxy(b, u.Host)
	u.Host = proxy.ln.Addr().String()
	caps := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	type result struct{ getRate, getCPU, getTrips, genRate, genCPU, genTrips, createRate, createCPU, createTrips float64 }
	run := func(b *testing.B, listen bool, opts ...func(*config)) result {
		s := startBenchServer(b, 1, false, nil, opts...)
		if pg, ok := s.app.fleet(); ok && listen {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			store := s.app.tasks.Store()
			go func() {
				defer close(done)
				pg.Listen(ctx, postgres.Listener{Task: store.NotifyVersion, Connected: store.FlushLive,
					Resync: func() { _ = store.Revalidate(ctx) }})
			}()
			b.Cleanup(func() { cancel(); <-done })
			eventually(b, 10*time.Second, pg.Fence().Fresh, "the listener's fence")
		}
		hc := benchClient(1)
		id := createPolled(b, hc, s.url+"/mcp", caps, "")
		gid := createPolled(b, hc, s.url+"/mcp", map[string]any{}, "")
		var r result
		for _, op := range []struct {
			spec             loadSpec
			rate, cpu, trips *float64
		}{
			{loadSpec{URL: s.url + "/mcp", Concurrency: 32, Warmup: 300 * time.Millisecond, Duration: 2 * time.Second,
				Headers: rpcHeaders("tasks/get", id, ""), Body: rpcBody(2, "tasks/get", map[string]any{"taskId": id}, caps), Expect: `"status":"working"`},
				&r.getRate, &r.getCPU, &r.getTrips},
			{loadSpec{URL: s.url + "/mcp", Concurrency: 32, Warmup: 300 * time.Millisecond, Duration: 2 * time.Second,
				Headers: rpcHeaders("tools/call", "get_generation", ""),
				Body:    rpcBody(2, "tools/call", map[string]any{"name": "get_generation", "arguments": map[string]any{"generationId": gid}}, map[string]any{}),
				Expect:  `"status":"queued"`},
				&r.genRate, &r.genCPU, &r.genTrips},
			{loadSpec{URL: s.url + "/mcp", Concurrency: 32, Warmup: 300 * time.Millisecond, Duration: 2 * time.Second,
				Headers: rpcHeaders("tools/call", "generate", ""), Body: rpcBody(3, "tools/call", map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": "durable"}}, caps),
				Expect: `"resultType":"task"`},
				&r.createRate, &r.createCPU, &r.createTrips},
		} {
			trips0 := proxy.trips.Load()
			res, cpu := loadFromChild(b, op.spec)
			if res.Errors > 0 {
				b.Errorf("%d errors: %s", res.Errors, res.ErrSample)
			}
			*op.rate = float64(res.Measured) / res.Elapsed.Seconds()
			*op.cpu = float64(cpu.Microseconds()) / float64(res.Total)
			*op.trips = float64(proxy.trips.Load()-trips0) / float64(res.Total)
		}
		return r
	}
	hideNsPerOp(b)
	var lite, pg, pgOld result
	for range b.N {
		lite = run(b, false)
		pgOld = run(b, false, func(c *config) { c.DatabaseURL = u.String() })
		pg = run(b, true, func(c *config) { c.DatabaseURL = u.String() })
	}
	b.ReportMetric(lite.getRate, "sqlite_get/s")
	b.ReportMetric(pgOld.getRate, "pg_nofence_get/s")
	b.ReportMetric(pg.getRate, "pg_get/s")
	b.ReportMetric(pgOld.getRate/lite.getRate, "get_pg_nofence/sqlite")
	b.ReportMetric(pg.getRate/lite.getRate, "get_pg/sqlite")
	b.ReportMetric(lite.getCPU, "sqlite_get_cpu_us")
	b.ReportMetric(pg.getCPU, "pg_get_cpu_us")
	b.ReportMetric(pgOld.getTrips, "pg_nofence_get_roundtrips")
	b.ReportMetric(pg.getTrips, "pg_get_roundtrips")
	b.ReportMetric(lite.genRate, "sqlite_getgen/s")
	b.ReportMetric(pgOld.genRate, "pg_nofence_getgen/s")
	b.ReportMetric(pg.genRate, "pg_getgen/s")
	b.ReportMetric(pgOld.genRate/lite.genRate, "getgen_pg_nofence/sqlite")
	b.ReportMetric(pg.genRate/lite.genRate, "getgen_pg/sqlite")
	b.ReportMetric(pg.genTrips, "pg_getgen_roundtrips")
	b.ReportMetric(lite.createRate, "sqlite_create/s")
	b.ReportMetric(pg.createRate, "pg_create/s")
	b.ReportMetric(lite.createCPU, "sqlite_create_cpu_us")
	b.ReportMetric(pg.createCPU, "pg_create_cpu_us")
	b.ReportMetric(pg.createTrips, "pg_create_roundtrips")
}
