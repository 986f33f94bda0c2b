package generation

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
)

// TestRetentionRoundPurgesHistory: the retention round (RunRetention)
// deletes the records of generations ended longer ago than History, with
// their input images and webhook deliveries; a younger one stays; a
// deleted one reads as unknown.
func TestRetentionRoundPurgesHistory(t *testing.T) {
	skew := &atomic.Int64{}
	rounds := make(chan error, 4)
	e := newEnv(t, func(c *Config) {
		c.Retention, c.History = 24*time.Hour, 48*time.Hour
		c.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		c.Exclusive = func(ctx context.Context, job string, fn func(context.Context) error) error {
			err := fn(ctx)
			rounds <- err // the round is over
			return err
		}
	})
	startRunner(t, e)
	ctx := context.Background()
	done := e.waitDone(e.create("alice", CreateRequest{ModelID: "local-animate", Prompt: "ripples", InputImage: &InputImage{Data: pngBytes(t)}}).ID)
	reserved := e.create("alice", CreateRequest{ModelID: "local-animate", Prompt: "never uploaded"})
	if _, _, err := e.svc.Cancel(ctx, "alice", reserved.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		_, err := tx.InsertDelivery(ctx, Delivery{Provider: "local", DeliveryID: "d1", GenerationID: done.ID, Event: `{}`, ReceivedAt: time.Now()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	keys := []string{done.Params.InputImage.Key, done.Outputs[0].Key}
	count := func(table string) int {
		n, err := e.db.QueryInt("SELECT count(*) FROM " + table)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	round := func(ahead time.Duration) {
		t.Helper()
		skew.Store(int64(ahead))
		rctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() { e.svc.RunRetention(rctx, time.Hour, nil); close(stopped) }()
		if err := <-rounds; err != nil {
			t.Fatal(err)
		}
		cancel()
		<-stopped
	}

	round(47 * time.Hour) // outputs expire; the records are younger than History
	if g, d := count("generations"), count("webhook_deliveries"); g != 2 || d != 0 {
		t.Fatalf("after 47 h: %d generations, %d deliveries; want 2, 0 (an ended generation's deliveries dedupe nothing)", g, d)
	}
	if _, err := e.svc.Get(ctx, "alice", done.ID); err != nil {
		t.Fatalf("a record younger than History: %v", err)
	}
	round(49 * time.Hour)
	if g := count("generations"); g != 0 {
		t.Fatalf("after 49 h: %d generations, want 0", g)
	}
	for _, id := range []string{done.ID, reserved.ID} {
		if _, err := e.svc.Get(ctx, "alice", id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s) after the purge: %v, want ErrNotFound", id, err)
		}
	}
	for _, k := range keys {
		if _, err := e.blobs.Stat(ctx, k); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("%s still stored: %v", k, err)
		}
	}
}
