package generation

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
)

// flakyStore is a real local store whose Puts fail while down is set, as
// during a storage outage.
type flakyStore struct {
	blob.Store
	failures atomic.Int64 // Puts left to fail; negative: fail forever
}

func (f *flakyStore) Put(ctx context.Context, key string, r io.Reader, ct string, max int64) (blob.Object, error) {
	if n := f.failures.Load(); n != 0 {
		f.failures.Add(-1)
		_, _ = io.Copy(io.Discard, r)
		return blob.Object{}, errors.New("connection refused")
	}
	return f.Store.Put(ctx, key, r, ct, max)
}

func newFaultRig(t *testing.T, failures int64, giveUp time.Duration) (*Service, *flakyStore) {
	t.Helper()
	dir := t.TempDir()
	d, err := OpenTestEngine(filepath.Join(dir, "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := blob.NewLocal(filepath.Join(dir, "files"), []byte("0123456789abcdef0123456789abcdef"), "http://x")
	if err != nil {
		t.Fatal(err)
	}
	fs := &flakyStore{Store: l}
	fs.failures.Store(failures)
	p, err := local.New(local.Options{Dir: dir, Scale: 0})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(Config{Store: d.Generations(), Blobs: fs, Providers: []provider.Provider{p}})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(svc, RunnerConfig{StorageGiveUp: giveUp})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = d.Close() })
	return svc, fs
}

// awaitMessage waits (event-driven) until the generation's status message
// contains want, or it ends.
func awaitMessage(t *testing.T, s *Service, id, want string) *Generation {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		ch, release := s.Hub().Watch(id)
		g, err := s.Get(context.Background(), "o", id)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(g.StatusMessage, want) || g.Status.Terminal() {
			release()
			return g
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("status message never said %q; last: %s %q", want, g.Status, g.StatusMessage)
		}
		release()
	}
}

func TestStorageOutageWaitsThenCompletes(t *testing.T) {
	s, _ := newFaultRig(t, 2, time.Hour)
	g, _, err := s.Create(context.Background(), "o", CreateRequest{ModelID: "local-sketch", Prompt: "outage"})
	if err != nil {
		t.Fatal(err)
	}
	mid := awaitMessage(t, s, g.ID, "waiting for storage")
	if mid.Status != StatusRunning {
		t.Fatalf("during the outage: %s %q", mid.Status, mid.StatusMessage)
	}
	end, _, err := s.Wait(context.Background(), "o", g.ID, 20*time.Second)
	if err != nil || end.Status != StatusCompleted || len(end.Outputs) != 1 {
		t.Fatalf("after storage returned: %+v %v", end, err)
	}
}

func TestStorageOutageGivesUp(t *testing.T) {
	s, _ := newFaultRig(t, -1, 500*time.Millisecond)
	g, _, err := s.Create(context.Background(), "o", CreateRequest{ModelID: "local-sketch", Prompt: "outage forever"})
	if err != nil {
		t.Fatal(err)
	}
	end, _, err := s.Wait(context.Background(), "o", g.ID, 20*time.Second)
	if err != nil || end.Status != StatusFailed || end.ErrorKind != ErrorInternal || !strings.Contains(end.ErrorMessage, "storage unreachable") {
		t.Fatalf("gave up: %s %s %q %v", end.Status, end.ErrorKind, end.ErrorMessage, err)
	}
}
