package generation

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
)

// lateUploadStore runs afterList once ExpireReservations has listed the
// candidates and before it decides: an upload that lands in between.
type lateUploadStore struct {
	Store
	afterList func()
}

func (s lateUploadStore) ReservationsToExpire(ctx context.Context, before time.Time, limit int) ([]string, error) {
	ids, err := s.Store.ReservationsToExpire(ctx, before, limit)
	if s.afterList != nil {
		s.afterList()
	}
	return ids, err
}

// TestReservationExpires: a reservation nobody completes ends failed with
// the reason and a refund once ReservationTTL has passed since it was
// created, never before; an upload that queued it first, even one that
// lands after the round listed it, wins; an upload after the expiry is
// refused.
func TestReservationExpires(t *testing.T) {
	const ttl = 30 * time.Minute
	// An image to edit, its mask to upload (Create fills the slice in).
	mask := func() []RoleInput {
		return []RoleInput{{Role: "image", Image: &InputImage{Data: pngHeader(64, 64, 8, 2)}}, {Role: "mask"}}
	}
	cases := []struct {
		name string
		req  CreateRequest
		// upload, when set, is the role uploaded: before the round
		// (early) or between its listing and its decision (late).
		upload      string
		early, late bool
		age         time.Duration
		want        Status
		why         string // in the error message
	}{
		{name: "input image never uploaded", req: CreateRequest{ModelID: "local-animate", Prompt: "ripples"}, age: ttl + time.Millisecond,
			want: StatusFailed, why: "its input image never came: nobody called upload_input within 30m"},
		{name: "mask never uploaded", req: CreateRequest{ModelID: "local-edit", Prompt: "erase", Inputs: mask()}, age: ttl + time.Millisecond,
			want: StatusFailed, why: "its mask never came"},
		{name: "spend never approved", req: CreateRequest{ModelID: "local-sketch", Prompt: "pan", HoldForApproval: true}, age: ttl + time.Millisecond,
			want: StatusFailed, why: "its spend was not approved within 30m"},
		{name: "not yet", req: CreateRequest{ModelID: "local-animate", Prompt: "ripples"}, age: ttl,
			want: StatusReserved},
		{name: "uploaded in time", req: CreateRequest{ModelID: "local-animate", Prompt: "ripples"}, upload: "first_frame", early: true, age: time.Hour,
			want: StatusQueued},
		{name: "upload lands after the listing", req: CreateRequest{ModelID: "local-edit", Prompt: "erase", Inputs: mask()}, upload: "mask", late: true, age: time.Hour,
			want: StatusQueued},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := testclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			var e *testEnv
			var g *Generation
			store := &lateUploadStore{}
			upload := func() {
				t.Helper()
				if _, err := e.svc.UploadInput(t.Context(), "alice", g.ID, c.upload, InputImage{Data: pngHeader(64, 64, 8, 2)}); err != nil {
					t.Fatalf("upload %s: %v", c.upload, err)
				}
			}
			e = newEnv(t, func(cfg *Config) {
				cfg.Now = clock.Now
				store.Store = cfg.Store
				cfg.Store = store
			})
			g = e.create("alice", c.req)
			if g.Status != StatusReserved || g.Charged == 0 {
				t.Fatalf("created %s charged %d", g.Status, g.Charged)
			}
			if c.early {
				upload()
			}
			if c.late {
				store.afterList = upload
			}
			woken, release := e.svc.Hub().Watch(g.ID)
			defer release()
			clock.Advance(c.age)
			n, err := e.svc.ExpireReservations(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got, _ := e.svc.Get(t.Context(), "alice", g.ID)
			if got.Status != c.want {
				t.Fatalf("after %s: %s (%q), want %s", c.age, got.Status, got.StatusMessage, c.want)
			}
			if c.want != StatusFailed {
				if n != 0 {
					t.Errorf("ExpireReservations = %d, want 0", n)
				}
				return
			}
			if n != 1 || got.Charged != 0 || got.ErrorKind != ErrorExpired || !strings.Contains(got.ErrorMessage, c.why) ||
				!strings.Contains(got.StatusMessage, "refunded") {
				t.Fatalf("expired %d: charged %d, %s %q, status message %q", n, got.Charged, got.ErrorKind, got.ErrorMessage, got.StatusMessage)
			}
			if spent, _ := e.svc.Spent(t.Context(), "alice"); spent != 0 {
				t.Errorf("spent %d after the refund", spent)
			}
			if !closed(woken) || !slices.Equal(e.changesFor(g.ID), []string{"failed"}) {
				t.Errorf("woken %v, observer saw %v", closed(woken), e.changesFor(g.ID))
			}
			// Too late: a terminal generation never changes.
			if _, err := e.svc.UploadInput(t.Context(), "alice", g.ID, "", InputImage{Data: pngHeader(64, 64, 8, 2)}); err == nil ||
				!strings.Contains(err.Error(), "is failed") {
				t.Errorf("upload after the expiry: %v", err)
			}
			if n, err := e.svc.ExpireReservations(t.Context()); n != 0 || err != nil {
				t.Errorf("second round: %d, %v", n, err)
			}
		})
	}
}

// TestRetentionRoundExpiresReservations: the retention round (what
// cmd/darkroom runs in the background) is what ends them.
func TestRetentionRoundExpiresReservations(t *testing.T) {
	clock := testclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, func(cfg *Config) { cfg.Now = clock.Now })
	g := e.create("alice", CreateRequest{ModelID: "local-animate", Prompt: "ripples"})
	clock.Advance(DefaultReservationTTL + time.Millisecond)
	woken, release := e.svc.Hub().Watch(g.ID)
	defer release()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); e.svc.RunRetention(ctx, time.Hour, func(err error) { t.Error(err) }) }()
	select {
	case <-woken:
	case <-time.After(waitLimit):
		t.Fatal("the retention round did not end the reservation")
	}
	cancel()
	<-done
	if got, _ := e.svc.Get(t.Context(), "alice", g.ID); got.Status != StatusFailed {
		t.Fatalf("after the round: %s", got.Status)
	}
}
