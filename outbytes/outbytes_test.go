package outbytes

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"testing"
)

func TestBudget(t *testing.T) {
	type step struct {
		caller  string
		n       int64
		ok      bool
		release int // release the share taken at this step index (-1 none)
	}
	for _, tc := range []struct {
		name  string
		total int64
		steps []step
	}{
		{"within the total", 100, []step{{"a", 30, true, -1}, {"b", 30, true, -1}, {"c", 40, true, -1}, {"d", 1, false, -1}}},
		{"one caller at most half", 100, []step{{"a", 30, true, -1}, {"a", 20, true, -1}, {"a", 1, false, -1}, {"b", 50, true, -1}}},
		{"a caller holding nothing may take one share above half", 100, []step{{"a", 80, true, -1}, {"a", 1, false, -1}, {"b", 20, true, -1}, {"b", 1, false, -1}}},
		{"never above the total", 100, []step{{"a", 101, false, -1}, {"a", 100, true, -1}}},
		{"a release gives the share back", 100, []step{{"a", 50, true, -1}, {"a", 1, false, 0}, {"a", 50, true, -1}}},
		{"a second release is a no-op", 100, []step{{"a", 60, true, -1}, {"b", 40, true, 0}, {"c", 0, true, 0}, {"c", 50, true, -1}, {"d", 11, false, -1}}},
		{"unlimited", 0, []step{{"a", 1 << 40, true, -1}, {"a", 1 << 40, true, -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.total)
			releases := map[int]func(){}
			for i, s := range tc.steps {
				rel, err := b.TryAcquire(s.caller, s.n)
				if (err == nil) != s.ok {
					t.Fatalf("step %d (%s %d): err %v, want ok %v", i, s.caller, s.n, err, s.ok)
				}
				var r *Refused
				if err != nil && (!errors.As(err, &r) || r.RetryAfter <= 0) {
					t.Fatalf("step %d: refusal %v is not retryable", i, err)
				}
				if err == nil {
					releases[i] = rel
				}
				if s.release >= 0 {
					releases[s.release]()
				}
			}
		})
	}
}

// TestBudgetConcurrent: many callers racing never hold more than the
// total, and everything comes back.
func TestBudgetConcurrent(t *testing.T) {
	b := New(1000)
	var wg sync.WaitGroup
	for i := range 16 {
		caller := string(rune('a' + i%4))
		wg.Go(func() {
			for range 500 {
				if rel, err := b.TryAcquire(caller, 70); err == nil {
					if all, _ := b.Used(caller); all > 1000 {
						t.Errorf("%d held, above the total", all)
					}
					rel()
					rel()
				}
			}
		})
	}
	wg.Wait()
	if all, _ := b.Used("a"); all != 0 {
		t.Fatalf("%d bytes still held", all)
	}
}

func source(b []byte) Source {
	sum := sha256.Sum256(b)
	return Source{Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:]), Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
}

type result struct {
	Text string `json:"text"`
	Blob []byte `json:"blob,omitzero"`
	More []byte `json:"more,omitzero"`
}

// TestStreamEqualsEncoding: the streamed text is the encoding of the
// result with the bytes in it, for sizes around the chunk boundaries, and
// its announced length is its length.
func TestStreamEqualsEncoding(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, rawChunk - 1, rawChunk, rawChunk + 1, 2*rawChunk + 2, 3*rawChunk + 1} {
		raw := make([]byte, n)
		_, _ = rand.Read(raw)
		more := []byte("<second & blob>")
		want, _ := json.Marshal(result{Text: "a <b>", Blob: raw, More: more})

		ctx, d := WithDeferral(context.Background())
		s1, err := Blob(ctx, nil, "a", source(raw))
		if err != nil {
			t.Fatal(err)
		}
		s2, _ := Blob(ctx, nil, "a", source(more))
		enc, _ := json.Marshal(result{Text: "a <b>", Blob: s1, More: s2})
		if !d.Deferred() || bytes.Equal(s1, raw) {
			t.Fatal("nothing deferred")
		}
		p, err := d.Plan(context.Background(), enc)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if _, err := p.WriteTo(&out); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(out.Bytes(), want) || p.Len != int64(len(want)) {
			t.Fatalf("%d bytes: streamed %d bytes (announced %d), want %d, equal %v", n, out.Len(), p.Len, len(want), bytes.Equal(out.Bytes(), want))
		}
	}
}

// TestStreamMismatch: bytes that are not their record's fail with
// ErrMismatch before the last chunk is written, so the text is short of
// its announced length: a reader never takes it for whole.
func TestStreamMismatch(t *testing.T) {
	raw := make([]byte, 3*rawChunk+10)
	_, _ = rand.Read(raw)
	good := source(raw)
	for _, tc := range []struct {
		name string
		src  Source
	}{
		{"other sha256", Source{Size: good.Size, SHA256: hex.EncodeToString(make([]byte, 32)), Open: good.Open}},
		{"shorter", Source{Size: good.Size + 1, SHA256: good.SHA256, Open: good.Open}},
		{"longer", Source{Size: good.Size - 1, SHA256: good.SHA256, Open: good.Open}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, d := WithDeferral(context.Background())
			s, _ := Blob(ctx, nil, "a", tc.src)
			enc, _ := json.Marshal(result{Blob: s})
			p, err := d.Plan(context.Background(), enc)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if _, err := p.WriteTo(&out); !errors.Is(err, ErrMismatch) {
				t.Fatalf("err %v, want ErrMismatch", err)
			}
			if int64(out.Len()) >= p.Len-1 {
				t.Fatalf("%d of %d bytes written", out.Len(), p.Len)
			}
			if _, err := Read(context.Background(), nil, "a", tc.src); !errors.Is(err, ErrMismatch) {
				t.Fatalf("Read: err %v, want ErrMismatch", err)
			}
		})
	}
}

// TestReadHoldsItsShare: go-sdk's path keeps its share of the resident
// copies on the request's hold until the hold is released, and is
// refused at once past the budget.
func TestReadHoldsItsShare(t *testing.T) {
	raw := bytes.Repeat([]byte("x"), 300)
	b := New(4 * ResidentCost(300))
	ctx, release := WithHold(context.Background())
	got, err := Read(ctx, b, "a", source(raw))
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Read: %v", err)
	}
	if all, mine := b.Used("a"); all != ResidentCost(300) || mine != all {
		t.Fatalf("held %d (%d), want %d", all, mine, ResidentCost(300))
	}
	if _, err := Read(ctx, b, "a", source(raw)); err != nil {
		t.Fatal(err)
	}
	var r *Refused
	if _, err := Read(ctx, b, "a", source(raw)); !errors.As(err, &r) {
		t.Fatalf("past half the budget: %v, want *Refused", err)
	}
	release()
	if all, _ := b.Used("a"); all != 0 {
		t.Fatalf("%d held after release", all)
	}
	// Without a hold nothing would release it: it is released at once.
	if _, err := Read(context.Background(), b, "a", source(raw)); err != nil {
		t.Fatal(err)
	}
	if all, _ := b.Used("a"); all != 0 {
		t.Fatalf("%d held without a hold", all)
	}
}

// TestPlanRefusesAMissingSentinel: an encoding that lost or repeated a
// sentinel is not streamed.
func TestPlanRefusesAMissingSentinel(t *testing.T) {
	ctx, d := WithDeferral(context.Background())
	s, _ := Blob(ctx, nil, "a", source([]byte("abc")))
	enc, _ := json.Marshal(result{Blob: s})
	for _, e := range [][]byte{[]byte(`{}`), append(append([]byte{}, enc...), enc...)} {
		if _, err := d.Plan(context.Background(), e); err == nil {
			t.Errorf("%s: planned", e)
		}
	}
}
