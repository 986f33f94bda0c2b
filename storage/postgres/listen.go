package postgres

import (
	"context"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Replicas wake each other through LISTEN/NOTIFY: a write that changed a
// generation or a task sends pg_notify inside its transaction, so the
// signal is delivered only if, and once, it commits. The signal carries
// no state: a woken waiter re-reads the row, the table stays the truth.
// NOTIFY is fire-and-forget (a dropped connection loses what was sent
// meanwhile), so the listener also resyncs: after every (re)connect and
// every ResyncEvery it asks every local waiter to re-read.
const (
	chanGeneration = "darkroom_generation"
	chanTask       = "darkroom_task"
)

type note struct{ channel, id string }

// note records a change to announce at commit; duplicates are dropped.
func (t *Tx) note(channel, id string) {
	for _, n := range t.notes {
		if n == (note{channel, id}) {
			return
		}
	}
	t.notes = append(t.notes, note{channel, id})
}

// noted is an :execrows outcome (true: it changed the row), the change
// noted on channel.
func (t *Tx) noted(channel, id string, n int64, err error) (bool, error) {
	if n == 1 {
		t.note(channel, id)
	}
	return n == 1, err
}

// announce sends the transaction's notes in one statement, before commit:
// PostgreSQL delivers them at commit and drops them on rollback. The
// payload is origin:id:version, the version the row has in this
// transaction (the trigger set it; the row stays locked until commit, so
// it is the committed one; -1 for a row deleted).
func (d *DB) announce(ctx context.Context, t *Tx) error {
	if len(t.notes) == 0 {
		return nil
	}
	chans := make([]string, len(t.notes))
	ids := make([]string, len(t.notes))
	for i, n := range t.notes {
		chans[i], ids[i] = n.channel, n.id
	}
	// Queued: it goes with the COMMIT, after the transaction's writes, so
	// it reads the versions they made.
	return t.p.deferred(func() error {
		_, err := t.p.Exec(ctx, announceSQL, chans, ids, d.origin+":")
		return err
	})
}

const announceSQL = `SELECT pg_notify(n.c, $3 || n.id || ':' || COALESCE(CASE WHEN n.c = '` + chanTask + `'
    THEN (SELECT version FROM tasks WHERE task_id = n.id)
    ELSE (SELECT version FROM generations WHERE id = n.id) END, -1))
FROM unnest($1::text[], $2::text[]) AS n(c, id)`

// Listener receives the other replicas' changes (Listen).
type Listener struct {
	Generation func(id string) // a generation changed (generation.Hub.Publish)
	// Task: a task changed, now at version (-1: unknown)
	// (tasks.Store.NotifyVersion).
	Task func(id string, version int64)
	// Connected runs after each (re)connect, once listening, before
	// Resync: what was sent while no one listened is lost, so caches of
	// rows that can change drop them (tasks.Store.FlushLive; the engine's
	// own generation cache is flushed just before).
	Connected func()
	// Resync asks every local waiter to re-read: run after each
	// (re)connect and every ResyncEvery (default 2 s), it bounds what a
	// lost notification costs. The engine's generation cache is
	// revalidated just before.
	Resync      func()
	ResyncEvery time.Duration
	// Chaos (tests only) drops, delays and reorders what the listener
	// receives (chaos.go).
	Chaos *Chaos
}

// Listen runs the replica's listener until ctx ends, on a dedicated
// connection (not one of the pool's: LISTEN is per session), reconnecting
// with backoff when it drops.
func (d *DB) Listen(ctx context.Context, l Listener) {
	if l.ResyncEvery <= 0 {
		l.ResyncEvery = 2 * time.Second
	}
	resync := func() {
		// The cache first, so that the re-reads Resync wakes find the
		// rows a lost notification would have dropped; a failed query
		// is tried again at the next resync.
		_ = d.revalidateGenerations(ctx)
		if l.Resync != nil {
			l.Resync()
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { d.fence.run(ctx, d.Pool, d.fenceChannel()) })
	wg.Go(func() {
		t := time.NewTicker(l.ResyncEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				resync()
			}
		}
	})
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := d.listenOnce(ctx, l, resync, func() { backoff = 50 * time.Millisecond })
		if ctx.Err() != nil || err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listenOnce connects, listens and dispatches until the connection fails.
func (d *DB) listenOnce(ctx context.Context, l Listener, resync, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, d.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		d.listener.Store(0)
		d.fence.disconnected()
		_ = conn.Close(context.WithoutCancel(ctx))
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+chanGeneration+"; LISTEN "+chanTask+"; LISTEN "+d.fenceChannel()); err != nil {
		return err
	}
	d.listener.Store(conn.PgConn().PID())
	// From here every commit is delivered to this connection, in commit
	// order: fences sent from now on count, and what came before is
	// flushed.
	d.fence.connected()
	connected()
	d.gens.FlushLive()
	if l.Connected != nil {
		l.Connected()
	}
	resync() // whatever was sent while no one listened
	dispatch := func(n notice) {
		if n.channel == d.fenceChannel() {
			d.fence.echoed(n.payload)
			return
		}
		origin, rest, ok := strings.Cut(n.payload, ":")
		if !ok || origin == d.origin {
			return // our own: woken after commit already
		}
		id, v, _ := strings.Cut(rest, ":")
		version, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			version = -1
		}
		switch n.channel {
		case chanGeneration:
			// The cache before the waiters: a woken wait re-reads.
			d.gens.InvalidateBelow(id, version)
			if l.Generation != nil {
				l.Generation(id)
			}
		case chanTask:
			if l.Task != nil {
				l.Task(id, version)
			}
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		in := notice{channel: n.Channel, payload: n.Payload}
		if l.Chaos != nil {
			if err := l.Chaos.pass(ctx, in, d.fenceChannel(), dispatch); err != nil {
				return err
			}
			continue
		}
		dispatch(in)
	}
}

// notice is one notification as received.
type notice struct{ channel, payload string }

// ListenerPID is the backend pid of the listening connection, 0 while
// none is connected (tests and operators terminate it to see the
// listener reconnect).
func (d *DB) ListenerPID() uint32 { return d.listener.Load() }

// Exclusive runs fn unless another replica is running the same job (then
// it returns nil at once): fleet-wide chores such as the task sweep and
// output retention run on one replica at a time. It holds a session
// advisory lock on a pooled connection for fn's duration; if that
// connection dies the lock goes with it, which is safe because these jobs
// are idempotent (every change is compare-and-set).
func (d *DB) Exclusive(ctx context.Context, job string, fn func(ctx context.Context) error) error {
	conn, err := d.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	key := jobLock(job)
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil {
		return err
	}
	if !got {
		return nil
	}
	defer func() {
		_, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", key)
		if err != nil { // do not give a connection still holding the lock back
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	return fn(ctx)
}

// jobLock is the advisory lock id of a job, apart from migrationLock.
func jobLock(job string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("darkroom job " + job))
	k := int64(h.Sum64())
	if k == migrationLock {
		return k ^ 1
	}
	return k
}
