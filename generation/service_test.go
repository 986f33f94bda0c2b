package generation

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
)

// waitLimit bounds every blocking wait in these tests.
const waitLimit = 30 * time.Second

// countingProvider counts the calls that matter for "never submit twice".
type countingProvider struct {
	provider.Provider
	submits atomic.Int32
	finds   atomic.Int32
	// beforeStatus, when set before the runner starts, runs at the start
	// of every Status call.
	beforeStatus func(job provider.Job)
}

func (c *countingProvider) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	if c.beforeStatus != nil {
		c.beforeStatus(job)
	}
	return c.Provider.Status(ctx, job)
}

func (c *countingProvider) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	c.submits.Add(1)
	return c.Provider.Submit(ctx, req)
}

func (c *countingProvider) Find(ctx context.Context, key string) (provider.Job, bool, error) {
	c.finds.Add(1)
	return c.Provider.Find(ctx, key)
}

// testEnv is a service on a real database, blob folder and local
// provider (latency 0).
type testEnv struct {
	t       *testing.T
	db      TestEngine
	svc     *Service
	local   *local.Provider
	prov    *countingProvider
	blobs   *blob.Local
	dir     string
	kicks   atomic.Int32
	mu      sync.Mutex
	changes []string // "id:status" per Changed hook call
	hookErr func(g *Generation) error
}

type envOption func(*Config)

func newEnv(t *testing.T, opts ...envOption) *testEnv {
	t.Helper()
	dir := t.TempDir()
	d, err := OpenTestEngine(filepath.Join(dir, "darkroom.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	lp, err := local.New(local.Options{Dir: dir, Scale: 0})
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := blob.NewLocal(filepath.Join(dir, "files"), bytes.Repeat([]byte{7}, 32), "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, db: d, local: lp, prov: &countingProvider{Provider: lp}, blobs: blobs, dir: dir}
	cfg := Config{
		Store: d.Generations(), Blobs: blobs, Providers: []provider.Provider{e.prov}, MaxInputBytes: 64 << 10,
		Kick: func() { e.kicks.Add(1) },
		Observer: ObserverFunc(func(ctx context.Context, tx Tx, g *Generation) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.hookErr != nil {
				if err := e.hookErr(g); err != nil {
					return err
				}
			}
			e.changes = append(e.changes, g.ID+":"+string(g.Status))
			return nil
		}),
	}
	for _, o := range opts {
		o(&cfg)
	}
	if e.svc, err = NewService(cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *testEnv) create(owner string, req CreateRequest) *Generation {
	e.t.Helper()
	g, _, err := e.svc.Create(context.Background(), owner, req)
	if err != nil {
		e.t.Fatalf("create %+v: %v", req, err)
	}
	return g
}

func (e *testEnv) exec(query string, args ...any) {
	e.t.Helper()
	if err := e.db.Exec(query, args...); err != nil {
		e.t.Fatal(err)
	}
}

func (e *testEnv) count(where string, args ...any) int {
	e.t.Helper()
	n, err := e.db.QueryInt("SELECT COUNT(*) FROM generations "+where, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *testEnv) changesFor(id string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, c := range e.changes {
		if gid, st, _ := strings.Cut(c, ":"); gid == id {
			out = append(out, st)
		}
	}
	return out
}

// pngHeader is a PNG that ends after its header: enough for
// image.DecodeConfig, nothing to decode. colorType 2 is RGB, 6 RGBA.
func pngHeader(w, h uint32, depth, colorType byte) []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
		start := len(b)
		b = append(append(b, typ...), data...)
		b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
	}
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, w), h)
	chunk("IHDR", append(ihdr, depth, colorType, 0, 0, 0))
	chunk("IEND", nil)
	return b
}

func pngBytes(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 32, 18))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// waitForWatcher returns once someone watches id (a Wait is parked or
// about to park on the hub).
func waitForWatcher(t *testing.T, h *Hub, id string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		h.mu.Lock()
		_, ok := h.waiters[id]
		h.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nobody started waiting")
		}
		runtime.Gosched()
	}
}

type waitResult struct {
	g        *Generation
	timedOut bool
	err      error
}

func startWait(e *testEnv, ctx context.Context, owner, id string, timeout time.Duration) <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		g, to, err := e.svc.Wait(ctx, owner, id, timeout)
		out <- waitResult{g, to, err}
	}()
	return out
}

func recvWait(t *testing.T, c <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(waitLimit):
		t.Fatal("Wait did not return")
		return waitResult{}
	}
}

func notYet(t *testing.T, c <-chan waitResult, what string) {
	t.Helper()
	select {
	case r := <-c:
		t.Fatalf("Wait returned %s: %+v %v %v", what, r.g, r.timedOut, r.err)
	default:
	}
}

// TestWaitWakesOnChange: a parked Wait stays parked through a non-terminal
// change and returns on the terminal one, without waiting out its timeout.
func TestWaitWakesOnChange(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "held", HoldForApproval: true})
	if g.Status != StatusReserved {
		t.Fatalf("held generation is %s", g.Status)
	}
	res := startWait(e, ctx, "alice", g.ID, time.Hour)
	waitForWatcher(t, e.svc.Hub(), g.ID)
	notYet(t, res, "before any change")

	// reserved -> queued is a change but not the end: Wait re-arms.
	if _, err := e.svc.Approve(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	waitForWatcher(t, e.svc.Hub(), g.ID)
	notYet(t, res, "on a non-terminal change")

	if _, out, err := e.svc.Cancel(ctx, "alice", g.ID); err != nil || out != CancelDone {
		t.Fatalf("cancel: %v %v", out, err)
	}
	r := recvWait(t, res)
	if r.err != nil || r.timedOut || r.g.Status != StatusCancelled {
		t.Fatalf("Wait = %+v timedOut=%v err=%v", r.g, r.timedOut, r.err)
	}
	if n := e.svc.Hub().size(); n != 0 {
		t.Fatalf("%d hub entries left after Wait returned", n)
	}
}

func TestWaitEnds(t *testing.T) {
	e := newEnv(t)
	g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "held", HoldForApproval: true})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name      string
		ctx       context.Context
		owner, id string
		timeout   time.Duration
		check     func(r waitResult) bool
	}{
		{"timeout", context.Background(), "alice", g.ID, 10 * time.Millisecond, func(r waitResult) bool {
			return r.err == nil && r.timedOut && r.g.Status == StatusReserved
		}},
		{"context ended", cancelled, "alice", g.ID, time.Hour, func(r waitResult) bool { return errors.Is(r.err, context.Canceled) }},
		{"foreign", context.Background(), "bob", g.ID, time.Hour, func(r waitResult) bool { return errors.Is(r.err, ErrNotFound) && !r.timedOut }},
		{"unknown", context.Background(), "alice", NewID(), time.Hour, func(r waitResult) bool { return errors.Is(r.err, ErrNotFound) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := recvWait(t, startWait(e, c.ctx, c.owner, c.id, c.timeout))
			if !c.check(r) {
				t.Fatalf("Wait = %+v timedOut=%v err=%v", r.g, r.timedOut, r.err)
			}
			if n := e.svc.Hub().size(); n != 0 {
				t.Fatalf("%d hub entries left", n)
			}
		})
	}
	// A terminal generation returns at once, without a watch left behind.
	if _, _, err := e.svc.Cancel(context.Background(), "alice", g.ID); err != nil {
		t.Fatal(err)
	}
	r := recvWait(t, startWait(e, context.Background(), "alice", g.ID, time.Hour))
	if r.err != nil || r.timedOut || r.g.Status != StatusCancelled {
		t.Fatalf("Wait on terminal = %+v %v %v", r.g, r.timedOut, r.err)
	}
}

// TestCancelUnsubmittedIsImmediate: reserved and queued-but-unsubmitted
// generations end cancelled at once, refunded, with hook and wake-up.
func TestCancelUnsubmittedIsImmediate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		req    CreateRequest
		status Status
	}{
		{"reserved awaiting image", CreateRequest{ModelID: "local-animate", Prompt: "ripples"}, StatusReserved},
		{"reserved awaiting approval", CreateRequest{ModelID: "local-motion", Prompt: "pan", HoldForApproval: true}, StatusReserved},
		{"queued, not submitted", CreateRequest{ModelID: "local-sketch", Prompt: "queued"}, StatusQueued},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := e.create("alice", c.req)
			if g.Status != c.status || g.Charged == 0 || g.Charged != g.Credits {
				t.Fatalf("created %s charged %d of %d", g.Status, g.Charged, g.Credits)
			}
			woken, release := e.svc.Hub().Watch(g.ID)
			defer release()
			kicks := e.kicks.Load()
			got, out, err := e.svc.Cancel(ctx, "alice", g.ID)
			if err != nil || out != CancelDone {
				t.Fatalf("Cancel = %v, %v", out, err)
			}
			if got.Status != StatusCancelled || got.Charged != 0 {
				t.Fatalf("after cancel: %s charged %d", got.Status, got.Charged)
			}
			if !closed(woken) {
				t.Fatal("waiters were not woken")
			}
			if h := e.changesFor(g.ID); !slices.Equal(h, []string{"cancelled"}) {
				t.Fatalf("Changed hook saw %v", h)
			}
			if e.kicks.Load() != kicks {
				t.Fatal("an immediate cancel kicked the runner")
			}
			stored, _ := e.svc.Get(ctx, "alice", g.ID)
			if stored.Status != StatusCancelled || stored.Charged != 0 {
				t.Fatalf("stored: %s charged %d", stored.Status, stored.Charged)
			}
			if spent, _ := e.svc.Spent(ctx, "alice"); spent != 0 {
				t.Fatalf("spent %d after refunds", spent)
			}
			// Again: too late, nothing changes.
			if again, out, err := e.svc.Cancel(ctx, "alice", g.ID); err != nil || out != CancelTooLate || again.Status != StatusCancelled {
				t.Fatalf("second cancel: %v %v", out, err)
			}
			if h := e.changesFor(g.ID); len(h) != 1 {
				t.Fatalf("second cancel ran the hook: %v", h)
			}
			if _, _, err := e.svc.Cancel(ctx, "bob", g.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("foreign cancel: %v", err)
			}
		})
	}
}

func TestCancelSubmittedAsksProvider(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "at the provider"})
	e.exec("UPDATE generations SET submit_state = 'submitted' WHERE id = ?", g.ID)
	kicks := e.kicks.Load()
	got, out, err := e.svc.Cancel(ctx, "alice", g.ID)
	if err != nil || out != CancelRequested {
		t.Fatalf("Cancel = %v, %v", out, err)
	}
	if got.Status != StatusQueued || !got.CancelRequested || got.Charged != got.Credits {
		t.Fatalf("after asking: %s requested=%v charged=%d", got.Status, got.CancelRequested, got.Charged)
	}
	if e.kicks.Load() == kicks {
		t.Fatal("the runner was not kicked to carry the cancel")
	}
	if _, out, _ := e.svc.Cancel(ctx, "alice", g.ID); out != CancelRequested {
		t.Fatalf("repeat cancel = %v, want CancelRequested", out)
	}
}

// TestHookFailureRollsBack: when the tasks layer cannot follow a change,
// the change does not happen.
func TestHookFailureRollsBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	g := e.create("alice", CreateRequest{ModelID: "local-animate", Prompt: "x"})
	e.hookErr = func(*Generation) error { return errors.New("task row unavailable") }
	woken, release := e.svc.Hub().Watch(g.ID)
	defer release()
	if _, _, err := e.svc.Cancel(ctx, "alice", g.ID); err == nil {
		t.Fatal("cancel succeeded though its hook failed")
	}
	if got, _ := e.svc.Get(ctx, "alice", g.ID); got.Status != StatusReserved || got.Charged != got.Credits {
		t.Fatalf("after a failed hook: %s charged %d", got.Status, got.Charged)
	}
	if closed(woken) {
		t.Fatal("waiters woken for a change that did not happen")
	}
}

func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	req := CreateRequest{ModelID: "local-sketch", Prompt: "same", IdempotencyKey: "k1"}
	first, existing, err := e.svc.Create(ctx, "alice", req)
	if err != nil || existing {
		t.Fatalf("first create: %v existing=%v", err, existing)
	}
	kicks := e.kicks.Load()
	again, existing, err := e.svc.Create(ctx, "alice", req)
	if err != nil || !existing || again.ID != first.ID || again.ModelID != "local-sketch" {
		t.Fatalf("repeat: %v existing=%v", err, existing)
	}
	if e.kicks.Load() != kicks {
		t.Fatal("a repeat kicked the runner")
	}
	// The same key with other arguments is refused, naming the key, and
	// changes nothing.
	before := e.count("")
	_, _, err = e.svc.Create(ctx, "alice", CreateRequest{ModelID: "local-photo", Prompt: "different", IdempotencyKey: "k1"})
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(ie.Msg, `"k1"`) {
		t.Fatalf("repeat with other arguments: %v", err)
	}
	if e.count("") != before {
		t.Fatal("a refused repeat created a generation")
	}
	other, existing, err := e.svc.Create(ctx, "bob", req)
	if err != nil || existing || other.ID == first.ID {
		t.Fatalf("another owner's key: %v existing=%v", err, existing)
	}
	// Concurrent first uses of one key converge on one generation.
	const n = 16
	ids := make(chan string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			g, _, err := e.svc.Create(ctx, "carol", CreateRequest{ModelID: "local-sketch", Prompt: "race", IdempotencyKey: "k2"})
			if err != nil {
				t.Errorf("concurrent create: %v", err)
				return
			}
			ids <- g.ID
		})
	}
	close(start)
	wg.Wait()
	close(ids)
	var seen []string
	for id := range ids {
		seen = append(seen, id)
	}
	if uniq := slices.Compact(slices.Sorted(slices.Values(seen))); len(uniq) != 1 || len(seen) != n {
		t.Fatalf("%d concurrent creates returned %d distinct ids: %v", len(seen), len(uniq), uniq)
	}
	if c := e.count("WHERE owner = 'carol'"); c != 1 {
		t.Fatalf("%d rows for one key", c)
	}
}

// msClock steps through the given unix-ms instants, repeating the last.
type msClock struct {
	mu  sync.Mutex
	at  []int64
	pos int
}

func (c *msClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ms := c.at[min(c.pos, len(c.at)-1)]
	c.pos++
	return time.UnixMilli(ms)
}

func TestListPaging(t *testing.T) {
	// Pairs share a millisecond, so paging must break ties by id.
	base := int64(1_780_000_000_000)
	clk := &msClock{at: []int64{base, base, base + 1, base + 1, base + 2, base + 2, base + 3}}
	e := newEnv(t, func(c *Config) { c.Now = clk.Now })
	ctx := context.Background()
	var all []*Generation
	for i := range 7 {
		all = append(all, e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: fmt.Sprint("p", i)}))
	}
	e.create("bob", CreateRequest{ModelID: "local-sketch", Prompt: "not alice's"})
	// Newest first, ties by id descending.
	want := slices.Clone(all)
	slices.SortFunc(want, func(a, b *Generation) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	for _, size := range []int{1, 2, 3, 7, 10} {
		t.Run(fmt.Sprint("page size ", size), func(t *testing.T) {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 10 {
					t.Fatal("paging does not end")
				}
				page, next, err := e.svc.List(ctx, "alice", "", cursor, size)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > size {
					t.Fatalf("page of %d, limit %d", len(page), size)
				}
				for _, g := range page {
					got = append(got, g.ID)
				}
				if next == "" {
					break
				}
				cursor = next
			}
			var wantIDs []string
			for _, g := range want {
				wantIDs = append(wantIDs, g.ID)
			}
			if !slices.Equal(got, wantIDs) {
				t.Fatalf("paged %v\nwant  %v", got, wantIDs)
			}
		})
	}
	// Status filter.
	for _, g := range all[:2] {
		if _, _, err := e.svc.Cancel(ctx, "alice", g.ID); err != nil {
			t.Fatal(err)
		}
	}
	if page, _, err := e.svc.List(ctx, "alice", StatusCancelled, "", 10); err != nil || len(page) != 2 {
		t.Fatalf("cancelled filter: %d, %v", len(page), err)
	}
	if page, _, err := e.svc.List(ctx, "alice", StatusQueued, "", 10); err != nil || len(page) != 5 {
		t.Fatalf("queued filter: %d, %v", len(page), err)
	}
	// Bad input.
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for name, c := range map[string]struct {
		status Status
		cursor string
	}{
		"bad status":        {"done", ""},
		"not base64":        {"", "***"},
		"no separator":      {"", enc("12345")},
		"no id":             {"", enc("12345:")},
		"negative time":     {"", enc("-5:abc")},
		"time not a number": {"", enc("abc:def")},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := e.svc.List(ctx, "alice", c.status, c.cursor, 10)
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("List = %v, want InputError", err)
			}
		})
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	img := pngBytes(t)
	long := strings.Repeat("x", 4001)
	cases := []struct {
		name string
		req  CreateRequest
		want string
	}{
		{"unknown model", CreateRequest{ModelID: "nope", Prompt: "x"}, "list_models"},
		{"blank prompt", CreateRequest{ModelID: "local-sketch", Prompt: " \n\t"}, "prompt"},
		{"long prompt", CreateRequest{ModelID: "local-sketch", Prompt: long}, "4000"},
		{"bad ratio", CreateRequest{ModelID: "local-sketch", Prompt: "x", AspectRatio: "7:3"}, "aspectRatio"},
		{"duration on image", CreateRequest{ModelID: "local-sketch", Prompt: "x", DurationSeconds: 4}, "video models only"},
		{"bad duration", CreateRequest{ModelID: "local-motion", Prompt: "x", DurationSeconds: 5}, "durationSeconds"},
		{"image on text model", CreateRequest{ModelID: "local-sketch", Prompt: "x", InputImage: &InputImage{Data: img}}, "does not take"},
		{"empty image", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{}}, "empty"},
		{"not an image", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: []byte("GIF89a not really")}}, "PNG, JPEG or WebP"},
		{"claimed type differs", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: img, MimeType: "image/jpeg"}}, "image/png"},
		{"image too large", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: append(slices.Clone(img), make([]byte, 64<<10)...)}}, "limit"},
		{"long idempotency key", CreateRequest{ModelID: "local-sketch", Prompt: "x", IdempotencyKey: long[:201]}, "idempotencyKey"},
		{"long prompt in characters", CreateRequest{ModelID: "local-sketch", Prompt: strings.Repeat("é", MaxPromptChars+1)}, "4001 characters"},
		{"long negative prompt", CreateRequest{ModelID: "local-sketch", Prompt: "x", NegativePrompt: strings.Repeat("日", MaxNegativePromptChars+1)}, "negativePrompt is 2001 characters"},
		{"long idempotency key in characters", CreateRequest{ModelID: "local-sketch", Prompt: "x", IdempotencyKey: strings.Repeat("ü", MaxIdempotencyKeyChars+1)}, "idempotencyKey is 201 characters"},
		{"negative duration", CreateRequest{ModelID: "local-motion", Prompt: "x", DurationSeconds: -2}, "between 1 and 60"},
		{"duration over the schema's maximum", CreateRequest{ModelID: "local-motion", Prompt: "x", DurationSeconds: 61}, "between 1 and 60"},
		{"image too wide", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: pngHeader(MaxInputSide+1, 1, 8, 2)}}, "8193×1 pixels"},
		{"image too tall", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: pngHeader(1, MaxInputSide+1, 8, 2)}}, "pixels a side"},
		{"image with too many pixels", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: pngHeader(8000, 5001, 16, 6)}}, "40 million"},
		{"16-bit bomb", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: pngHeader(20000, 20000, 16, 6)}}, "20000×20000"},
		{"image without pixels", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: pngHeader(0, 10, 8, 2)}}, "not a valid image/png"},
		{"broken PNG header", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: img[:20]}}, "not a valid image/png"},
		{"broken JPEG header", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: []byte("\xff\xd8\xff\xe0 not a jpeg")}}, "not a valid image/jpeg"},
		{"broken WebP header", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: []byte("RIFF\x10\x00\x00\x00WEBPVP8 junk")}}, "not a valid image/webp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, _, err := e.svc.Create(ctx, "alice", c.req)
			var ie *InputError
			if !errors.As(err, &ie) || g != nil {
				t.Fatalf("Create = %v, %v; want InputError", g, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("message %q does not mention %q", err, c.want)
			}
		})
	}
	if n := e.count(""); n != 0 {
		t.Fatalf("bad input created %d rows", n)
	}
	if e.kicks.Load() != 0 {
		t.Fatal("bad input kicked the runner")
	}
	assertNoFiles(t, e.blobs.Dir())

	// upload_input on the wrong generations.
	queued := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "q"})
	reserved := e.create("alice", CreateRequest{ModelID: "local-animate", Prompt: "r"})
	held := e.create("alice", CreateRequest{ModelID: "local-motion", Prompt: "h", HoldForApproval: true})
	before := e.count("WHERE status = 'reserved'")
	ups := []struct {
		name, id string
		img      InputImage
	}{
		{"queued generation", queued.ID, InputImage{Data: img}},
		{"model without input", held.ID, InputImage{Data: img}},
		{"not an image", reserved.ID, InputImage{Data: []byte("hello")}},
		{"wrong claimed type", reserved.ID, InputImage{Data: img, MimeType: "image/webp"}},
		{"16-bit bomb", reserved.ID, InputImage{Data: pngHeader(20000, 20000, 16, 6)}},
		{"broken header", reserved.ID, InputImage{Data: img[:24]}},
	}
	for _, u := range ups {
		t.Run("upload "+u.name, func(t *testing.T) {
			_, err := e.svc.UploadInput(ctx, "alice", u.id, "", u.img)
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("UploadInput = %v, want InputError", err)
			}
		})
	}
	if _, err := e.svc.UploadInput(ctx, "bob", reserved.ID, "", InputImage{Data: img}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("foreign upload: %v", err)
	}
	if e.count("WHERE status = 'reserved'") != before {
		t.Fatal("a refused upload moved a generation")
	}
	assertNoFiles(t, e.blobs.Dir())
	// The right upload works and queues.
	g, err := e.svc.UploadInput(ctx, "alice", reserved.ID, "", InputImage{Data: img})
	if err != nil || g.Status != StatusQueued || g.Params.InputImage == nil || g.Params.AwaitsImage {
		t.Fatalf("upload: %v %+v", err, g)
	}
	if _, err := e.svc.UploadInput(ctx, "alice", reserved.ID, "", InputImage{Data: img}); err == nil {
		t.Fatal("a second upload was accepted")
	}
}

func assertNoFiles(t *testing.T, dir string) {
	t.Helper()
	if n := countFiles(t, dir); n != 0 {
		t.Fatalf("%d files stored by refused input", n)
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestCreateReturnsTheStoredRecord: Create builds its answer without
// reading the row back; it must equal what Get reads.
func TestCreateReturnsTheStoredRecord(t *testing.T) {
	e := newEnv(t)
	seed := int64(7)
	cases := []struct {
		name string
		req  CreateRequest
	}{
		{"queued image", CreateRequest{ModelID: "local-sketch", Prompt: "a", Seed: &seed, AspectRatio: "1:1", NegativePrompt: "n"}},
		{"idempotency key", CreateRequest{ModelID: "local-sketch", Prompt: "b", IdempotencyKey: "k"}},
		{"held for approval", CreateRequest{ModelID: "local-motion", Prompt: "c", DurationSeconds: 2, HoldForApproval: true}},
		{"waiting for an image", CreateRequest{ModelID: "local-animate", Prompt: "d"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := e.create("alice", c.req)
			got, err := e.svc.Get(context.Background(), "alice", g.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, got) {
				t.Fatalf("Create returned\n %+v\nGet reads\n %+v", g, got)
			}
		})
	}
}

// TestValidateAtTheLimits: a value at a bound is accepted; bounds count
// characters, so a multibyte prompt of the limit's length passes.
func TestValidateAtTheLimits(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxInputBytes = 1 << 20 })
	cases := []struct {
		name string
		req  CreateRequest
	}{
		{"prompt of 4000 two-byte characters", CreateRequest{ModelID: "local-sketch", Prompt: strings.Repeat("é", MaxPromptChars)}},
		{"prompt of 4000 four-byte characters", CreateRequest{ModelID: "local-sketch", Prompt: strings.Repeat("🦀", MaxPromptChars)}},
		{"negative prompt of 2000 characters", CreateRequest{ModelID: "local-sketch", Prompt: "x", NegativePrompt: strings.Repeat("日", MaxNegativePromptChars)}},
		{"idempotency key of 200 characters", CreateRequest{ModelID: "local-sketch", Prompt: "x", IdempotencyKey: strings.Repeat("ü", MaxIdempotencyKeyChars)}},
		{"image 8192 wide", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: pngHeader(MaxInputSide, 4882, 16, 6)}}},
		{"image of 40 million pixels", CreateRequest{ModelID: "local-animate", Prompt: "x", InputImage: &InputImage{Data: pngHeader(8000, 5000, 16, 6)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := e.svc.Validate(&c.req); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}
