package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// testHooks is what the contract needs to see inside a backend; *Local
// and *S3 implement it in their _test.go files.
type testHooks interface {
	// debris lists backend-private leftovers (temporary files, staging
	// objects, unfinished multipart uploads). A failed Put must leave none.
	debris(t *testing.T) []string
	// corrupt changes the stored bytes of key without touching its
	// recorded size and SHA-256.
	corrupt(t *testing.T, key string)
	// setNow replaces the clock the backend signs (and, for Local, checks)
	// links by.
	setNow(now func() time.Time)
}

// big is above the part size the S3 tests use (MinS3PartSize), so S3 takes
// its multipart + copy path.
const big = 2*MinS3PartSize + 12345

func testData(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 7})
	r.Read(b)
	return b
}

func hexSHA(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// failingReader yields data and then fails with err instead of io.EOF.
func failingReader(data []byte, err error) io.Reader {
	return io.MultiReader(bytes.NewReader(data), errReader{err})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

var errBoom = errors.New("provider stream broke")

func mustPut(t *testing.T, st Store, key string, data []byte, ct string) Object {
	t.Helper()
	obj, err := st.Put(t.Context(), key, bytes.NewReader(data), ct, 0)
	if err != nil {
		t.Fatalf("Put(%s, %d bytes): %v", key, len(data), err)
	}
	return obj
}

func assertMissing(t *testing.T, st Store, key string) {
	t.Helper()
	if o, err := st.Stat(t.Context(), key); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat(%s) = %+v, %v; want ErrNotFound", key, o, err)
	}
	if rc, _, err := st.Open(t.Context(), key); !errors.Is(err, ErrNotFound) {
		if rc != nil {
			rc.Close()
		}
		t.Errorf("Open(%s) err = %v; want ErrNotFound", key, err)
	}
}

func assertNoDebris(t *testing.T, st Store) {
	t.Helper()
	if d := st.(testHooks).debris(t); len(d) > 0 {
		t.Errorf("leftovers after a failed Put: %v", d)
	}
}

func assertContent(t *testing.T, st Store, key string, data []byte, ct string) {
	t.Helper()
	want := Object{Key: key, Size: int64(len(data)), SHA256: hexSHA(data), ContentType: ct}
	got, err := st.Stat(t.Context(), key)
	if err != nil || got != want {
		t.Fatalf("Stat(%s) = %+v, %v; want %+v", key, got, err, want)
	}
	rc, got, err := st.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("Open(%s): %v", key, err)
	}
	defer rc.Close()
	if got != want {
		t.Errorf("Open(%s) object = %+v; want %+v", key, got, want)
	}
	body, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	if !bytes.Equal(body, data) {
		t.Errorf("read %s: %d bytes differ from the %d put", key, len(body), len(data))
	}
}

func httpGet(t *testing.T, u string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read: %v", u, err)
	}
	return resp.StatusCode, resp.Header, body
}

// tamperSig flips one hex digit of the link's signature parameter.
func tamperSig(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for _, name := range []string{"sig", "X-Amz-Signature"} {
		if s := q.Get(name); s != "" {
			c := byte('0')
			if s[0] == '0' {
				c = '1'
			}
			q.Set(name, string(c)+s[1:])
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	t.Fatalf("no signature parameter in %s", link)
	return ""
}

// testStore runs the Store contract. newStore returns a fresh, empty store
// whose signed links an http.Get from this process can fetch.
func testStore(t *testing.T, newStore func(t *testing.T) Store) {
	key := Key("alice", "gen-0001", 0, "png")

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		for i, n := range []int{0, 1, 1000, MinS3PartSize, big} {
			k := Key("alice", "gen-rt", i, "bin")
			data := testData(n, uint64(i))
			obj := mustPut(t, st, k, data, "image/png")
			if want := (Object{Key: k, Size: int64(n), SHA256: hexSHA(data), ContentType: "image/png"}); obj != want {
				t.Errorf("Put(%d bytes) = %+v; want %+v", n, obj, want)
			}
			assertContent(t, st, k, data, "image/png")
		}
		// A missing content type is recorded as application/octet-stream.
		mustPut(t, st, key, []byte("x"), "")
		assertContent(t, st, key, []byte("x"), DefaultContentType)
		assertNoDebris(t, st)
	})

	t.Run("Overwrite", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		mustPut(t, st, key, []byte("first"), "text/plain")
		mustPut(t, st, key, []byte("second, longer"), "image/webp")
		assertContent(t, st, key, []byte("second, longer"), "image/webp")
	})

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		assertMissing(t, st, key)
		mustPut(t, st, key, []byte("x"), "text/plain")
		assertMissing(t, st, Key("alice", "gen-0001", 1, "png"))
	})

	t.Run("TooLarge", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		ctx := t.Context()
		for _, tc := range []struct {
			n   int
			max int64
		}{{101, 100}, {big, MinS3PartSize + 1}, {big, big - 1}} {
			_, err := st.Put(ctx, key, bytes.NewReader(testData(tc.n, 1)), "image/png", tc.max)
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("Put(%d bytes, max %d) err = %v; want ErrTooLarge", tc.n, tc.max, err)
			}
			assertMissing(t, st, key)
			assertNoDebris(t, st)
		}
		// Exactly maxBytes is fine.
		data := testData(big, 2)
		if _, err := st.Put(ctx, key, bytes.NewReader(data), "image/png", big); err != nil {
			t.Fatalf("Put at exactly maxBytes: %v", err)
		}
		// A failed overwrite leaves the old blob intact.
		if _, err := st.Put(ctx, key, bytes.NewReader(testData(101, 3)), "text/plain", 100); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("overwrite too large: err = %v", err)
		}
		assertContent(t, st, key, data, "image/png")
		assertNoDebris(t, st)
	})

	t.Run("ReaderError", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		for _, n := range []int{0, 100, MinS3PartSize + 10, big} {
			_, err := st.Put(t.Context(), key, failingReader(testData(n, 4), errBoom), "image/png", 0)
			if !errors.Is(err, errBoom) {
				t.Errorf("Put failing after %d bytes: err = %v; want errBoom", n, err)
			}
			assertMissing(t, st, key)
			assertNoDebris(t, st)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		ctx, cancel := context.WithCancel(t.Context())
		r := io.MultiReader(bytes.NewReader(testData(MinS3PartSize+10, 5)), readerFunc(func(p []byte) (int, error) {
			cancel()
			return copy(p, "more"), nil
		}), bytes.NewReader(testData(big, 6)))
		if _, err := st.Put(ctx, key, r, "image/png", 0); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Put: err = %v; want context.Canceled", err)
		}
		assertMissing(t, st, key)
		assertNoDebris(t, st)
	})

	t.Run("SignedURL", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		ctx := t.Context()
		data := testData(70_000, 7)
		mustPut(t, st, key, data, "image/png")
		other := Key("bob", "gen-0002", 0, "png")
		mustPut(t, st, other, []byte("bob's"), "image/png")

		before := time.Now()
		link, exp, err := st.SignedURL(ctx, key, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if exp.Before(before.Add(10*time.Minute-time.Second)) || exp.After(time.Now().Add(10*time.Minute+time.Second)) {
			t.Errorf("expiresAt %v is not about 10 minutes from %v", exp, before)
		}
		code, h, body := httpGet(t, link)
		if code != 200 || !bytes.Equal(body, data) {
			t.Fatalf("GET signed link: %d, %d bytes; want 200 and the %d bytes put", code, len(body), len(data))
		}
		if ct := h.Get("Content-Type"); ct != "image/png" {
			t.Errorf("Content-Type = %q; want image/png", ct)
		}

		if code, _, _ := httpGet(t, tamperSig(t, link)); code != 403 {
			t.Errorf("GET with a tampered signature: %d; want 403", code)
		}
		// The same signature on another key is refused.
		moved := strings.Replace(link, key, other, 1)
		if moved == link {
			t.Fatalf("key %s not in link %s", key, link)
		}
		if code, _, body := httpGet(t, moved); code != 403 {
			t.Errorf("GET another key with this signature: %d %q; want 403", code, body)
		}
		// A good signature for a blob that is gone: 404.
		gone := Key("alice", "gen-gone", 0, "png")
		link2, _, err := st.SignedURL(ctx, gone, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if code, _, _ := httpGet(t, link2); code != 404 {
			t.Errorf("GET signed link to a missing blob: %d; want 404", code)
		}
	})

	t.Run("SignedURLExpires", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		mustPut(t, st, key, []byte("short-lived"), "text/plain")
		// Links are signed by a store clock an hour behind and fetched at
		// the real time, which Local's handler and the S3 server check by.
		const behind = time.Hour
		for _, c := range []struct {
			name string
			ttl  time.Duration
			want int
		}{
			{"ended 59 minutes ago", time.Minute, 403},
			{"ends in an hour", 2 * time.Hour, 200},
		} {
			signed := time.Now().Add(-behind)
			st.(testHooks).setNow(func() time.Time { return signed })
			link, exp, err := st.SignedURL(t.Context(), key, c.ttl)
			st.(testHooks).setNow(time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if d := exp.Sub(signed.Add(c.ttl)); d < -time.Second || d > time.Second {
				t.Errorf("%s: expiresAt %v; want about %v", c.name, exp, signed.Add(c.ttl))
			}
			if code, _, _ := httpGet(t, link); code != c.want {
				t.Errorf("GET link that %s: %d; want %d", c.name, code, c.want)
			}
		}
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		ctx := t.Context()
		mustPut(t, st, key, []byte("bye"), "text/plain")
		if err := st.Delete(ctx, key); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		assertMissing(t, st, key)
		if err := st.Delete(ctx, key); err != nil {
			t.Errorf("Delete of a deleted key: %v", err)
		}
		if err := st.Delete(ctx, Key("nobody", "never", 0, "png")); err != nil {
			t.Errorf("Delete of a missing key: %v", err)
		}
	})

	t.Run("OpenVerifies", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		data := testData(5000, 8)
		mustPut(t, st, key, data, "image/png")
		st.(testHooks).corrupt(t, key)
		rc, _, err := st.Open(t.Context(), key)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer rc.Close()
		if _, err := io.ReadAll(rc); !errors.Is(err, ErrChecksum) {
			t.Errorf("reading a corrupted blob: err = %v; want ErrChecksum", err)
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		ctx := t.Context()
		for _, k := range []string{"", "/abs", "../up", "a/../b", "a/./b", "a//b", "a/", ".hidden", "a/.staging/x", "sp ace", "q?x", "uni\u00e9", "back\\slash", strings.Repeat("k", MaxKeyLen+1)} {
			if _, err := st.Put(ctx, k, strings.NewReader("x"), "text/plain", 0); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Put(%q) err = %v; want ErrInvalidKey", k, err)
			}
			if _, err := st.Stat(ctx, k); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Stat(%q) err = %v; want ErrInvalidKey", k, err)
			}
			if _, _, err := st.Open(ctx, k); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Open(%q) err = %v; want ErrInvalidKey", k, err)
			}
			if _, _, err := st.SignedURL(ctx, k, time.Minute); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("SignedURL(%q) err = %v; want ErrInvalidKey", k, err)
			}
			if err := st.Delete(ctx, k); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Delete(%q) err = %v; want ErrInvalidKey", k, err)
			}
		}
		assertNoDebris(t, st)
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// BenchmarkRoundTrip times Put, Stat, Open (read to EOF) and a GET of a
// signed link for a 1 MiB blob on each backend (S3 only with a server).
func BenchmarkRoundTrip(b *testing.B) {
	data := testData(1<<20, 12)
	run := func(b *testing.B, st Store) {
		ctx := b.Context()
		b.SetBytes(int64(len(data)))
		for i := 0; b.Loop(); i++ {
			key := Key("bench", "gen-rt", i, "png")
			if _, err := st.Put(ctx, key, bytes.NewReader(data), "image/png", 0); err != nil {
				b.Fatal(err)
			}
			if _, err := st.Stat(ctx, key); err != nil {
				b.Fatal(err)
			}
			rc, _, err := st.Open(ctx, key)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, rc); err != nil {
				b.Fatal(err)
			}
			rc.Close()
			link, _, err := st.SignedURL(ctx, key, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			resp, err := http.Get(link)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || n != int64(len(data)) {
				b.Fatalf("GET: %d, %d bytes", resp.StatusCode, n)
			}
		}
	}
	b.Run("local", func(b *testing.B) {
		var h http.Handler
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
		defer ts.Close()
		l, err := NewLocal(b.TempDir(), testSecret, ts.URL)
		if err != nil {
			b.Fatal(err)
		}
		h = l.Handler()
		run(b, l)
	})
	b.Run("s3", func(b *testing.B) { run(b, newTestS3(b, s3Endpoint(b), nil)) })
}
