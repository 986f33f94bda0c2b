package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/storage/postgres"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
)

// TestNeverBackwardsAcrossReplicas: three replica processes on one
// PostgreSQL behind round-robin HAProxy, each listener with chaos on
// (DARKROOM_TEST_LISTEN_CHAOS: notifications dropped with their
// connection, the stream delayed up to 800 ms, neighbours swapped), and
// every replica's task and generation caches keeping live rows. Clients
// poll tasks/get (Tasks clients) or get_generation (the others) through
// the balancer with at least the fence window between a reply and the
// next request, so consecutive polls land on different replicas: no
// client ever sees a task's or a generation's status, progress or update
// time go backwards (the guarantee in ARCHITECTURE.md, "Reads on
// PostgreSQL").
func TestNeverBackwardsAcrossReplicas(t *testing.T) {
	if onPostgres() {
		t.Skip("engine-independent: runs in the default pass")
	}
	dbURL := pgtest.URL(t)
	env := replicaEnv(t, dbURL, "versions", "0.25", t.TempDir())
	var backends []string
	for i := range 3 {
		chaos := fmt.Sprintf("DARKROOM_TEST_LISTEN_CHAOS=drop=0.03,delay=0.5,reorder=0.3,maxdelay=800ms,seed=%d", i+1)
		p := startProcess(t, t.TempDir(), append(env, chaos)...)
		backends = append(backends, strings.TrimPrefix(p.url, "http://"))
	}
	lb, _ := startHAProxy(t, backends...)

	const clients = 8
	gap := postgres.FenceWindow + 10*time.Millisecond // between a reply and the next request
	var wg sync.WaitGroup
	var mu sync.Mutex
	var polls, changes int
	for c := range clients {
		wg.Go(func() {
			// Clients 0-3 are Tasks clients, 4-7 legacy ones; each pair
			// makes a video and an image.
			legacy := c >= clients/2
			rc := &rpcClient{t: t, url: lb, caps: withTasks()}
			if legacy {
				rc.caps = map[string]any{}
			}
			model := []string{"local-motion", "local-sketch"}[c%2]
			r := rc.tool("generate", map[string]any{"modelId": model, "prompt": fmt.Sprintf("never backwards %d", c)})
			id, _ := r.Result["taskId"].(string)
			poll := func() (taskSeen, error) {
				got := rc.call("tasks/get", map[string]any{"taskId": id})
				if got.Error != nil {
					return taskSeen{}, fmt.Errorf("tasks/get: %+v", got.Error)
				}
				return seenOf(got.Result), nil
			}
			if legacy {
				sc, _ := r.Result["structuredContent"].(map[string]any)
				id, _ = sc["generationId"].(string)
				poll = func() (taskSeen, error) {
					got := rc.tool("get_generation", map[string]any{"generationId": id})
					sc, _ := got.Result["structuredContent"].(map[string]any)
					if got.Error != nil || sc == nil {
						return taskSeen{}, fmt.Errorf("get_generation: %+v %v", got.Error, got.Result)
					}
					return generationSeen(sc), nil
				}
			}
			if id == "" {
				t.Errorf("client %d: generate: %+v %v", c, r.Error, r.Result)
				return
			}
			var last taskSeen
			var n, moved int
			deadline := time.Now().Add(90 * time.Second)
			for time.Now().Before(deadline) {
				seen, err := poll()
				if err != nil {
					t.Errorf("client %d: %v", c, err)
					return
				}
				n++
				if why := seen.before(last); why != "" && n > 1 {
					t.Errorf("client %d, %s went backwards (%s): %+v after %+v", c, id, why, seen, last)
					return
				}
				if seen != last {
					moved++
				}
				last = seen
				if seen.rank == 2 {
					break
				}
				time.Sleep(gap)
			}
			if last.rank != 2 {
				t.Errorf("client %d: %s did not finish: %+v", c, id, last)
			}
			mu.Lock()
			polls, changes = polls+n, changes+moved
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("%d clients, %d polls, %d changes seen", clients, polls, changes)
}

// taskSeen is what a client can compare between two polls of a task or
// a generation.
type taskSeen struct {
	rank     int // working or input_required 1 (a generation: reserved or queued 0, running 1), terminal 2
	progress int // the percent in statusMessage (a generation: its progress), -1 without
	updated  time.Time
}

// generationSeen is a get_generation reply's taskSeen.
func generationSeen(sc map[string]any) taskSeen {
	s := taskSeen{rank: 0, progress: -1}
	switch sc["status"] {
	case "running":
		s.rank = 1
	case "completed", "failed", "cancelled":
		s.rank = 2
	}
	if p, ok := sc["progress"].(float64); ok {
		s.progress = int(p * 1000)
	}
	if u, ok := sc["updatedAt"].(string); ok {
		s.updated, _ = time.Parse(time.RFC3339Nano, u)
	}
	return s
}

var percent = regexp.MustCompile(`(\d+)%`)

func seenOf(r map[string]any) taskSeen {
	s := taskSeen{rank: 1, progress: -1}
	switch r["status"] {
	case "completed", "failed", "cancelled":
		s.rank = 2
	}
	msg, _ := r["statusMessage"].(string)
	if m := percent.FindStringSubmatch(msg); m != nil {
		s.progress, _ = strconv.Atoi(m[1])
	}
	if u, ok := r["lastUpdatedAt"].(string); ok {
		s.updated, _ = time.Parse(time.RFC3339Nano, u)
	}
	return s
}

// before names what went backwards from last to s ("": nothing).
func (s taskSeen) before(last taskSeen) string {
	switch {
	case s.rank < last.rank:
		return "status"
	case s.rank == last.rank && s.rank < 2 && s.progress >= 0 && s.progress < last.progress:
		return "progress"
	case s.updated.Before(last.updated):
		return "lastUpdatedAt"
	}
	return ""
}
