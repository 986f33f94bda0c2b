package blob

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testSecret = []byte("0123456789abcdef-test-secret")

func (l *Local) debris(t *testing.T) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(l.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func (l *Local) corrupt(t *testing.T, key string) {
	t.Helper()
	f, err := os.OpenFile(l.path(key), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], 0); err != nil {
		t.Fatal(err)
	}
}

func (l *Local) setNow(now func() time.Time) { l.now = now }

// newTestLocal returns a Local in a temp dir, served by an httptest server.
func newTestLocal(t *testing.T) (*Local, *httptest.Server) {
	t.Helper()
	var h http.Handler
	mux := http.NewServeMux()
	mux.HandleFunc(FilesPath, func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	l, err := NewLocal(t.TempDir(), testSecret, ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	h = l.Handler()
	return l, ts
}

func TestLocalContract(t *testing.T) {
	testStore(t, func(t *testing.T) Store { l, _ := newTestLocal(t); return l })
}

func TestNewLocalRejects(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewLocal(dir, []byte("short"), ""); err == nil {
		t.Error("NewLocal accepted a 5-byte secret")
	}
	for _, base := range []string{"example.com", "ftp://x", "http://", "http://x/?a=b"} {
		if _, err := NewLocal(dir, testSecret, base); err == nil {
			t.Errorf("NewLocal accepted base URL %q", base)
		}
	}
	if _, err := NewLocal("", testSecret, ""); err == nil {
		t.Error("NewLocal accepted an empty dir")
	}
	l, err := NewLocal(dir, testSecret, "https://dr.example/sub/")
	if err != nil {
		t.Fatal(err)
	}
	u, _, err := l.SignedURL(t.Context(), "a/b.png", time.Minute)
	if err != nil || !strings.HasPrefix(u, "https://dr.example/sub/files/a/b.png?exp=") {
		t.Errorf("SignedURL = %q, %v", u, err)
	}
}

func TestLocalSignatureFormat(t *testing.T) {
	l, _ := newTestLocal(t)
	now := time.Unix(1_800_000_000, 250_000_000)
	l.now = func() time.Time { return now }
	u, exp, err := l.SignedURL(t.Context(), "k/1.png", 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// 1_800_000_090.25 rounds up to the next whole second.
	if exp.Unix() != 1_800_000_091 {
		t.Errorf("exp = %d", exp.Unix())
	}
	want := "?exp=1800000091&sig=" + hex.EncodeToString(l.sign("k/1.png", "1800000091"))
	if !strings.HasSuffix(u, "/files/k/1.png"+want) {
		t.Errorf("url %s does not end in %s", u, want)
	}
	if _, _, err := l.SignedURL(t.Context(), "k/1.png", 0); err == nil {
		t.Error("SignedURL accepted ttl 0")
	}
}

func TestLocalHandler(t *testing.T) {
	l, ts := newTestLocal(t)
	ctx := t.Context()
	key := Key("alice", "gen-h", 0, "png")
	data := testData(10_000, 9)
	obj := mustPut(t, l, key, data, "image/png")
	link, _, err := l.SignedURL(ctx, key, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Headers", func(t *testing.T) {
		code, h, body := httpGet(t, link)
		if code != 200 || !bytes.Equal(body, data) {
			t.Fatalf("GET: %d, %d bytes", code, len(body))
		}
		for name, want := range map[string]string{
			"Content-Type":           "image/png",
			"Content-Length":         strconv.Itoa(len(data)),
			"X-Content-Type-Options": "nosniff",
			"ETag":                   `"` + obj.SHA256 + `"`,
		} {
			if got := h.Get(name); got != want {
				t.Errorf("%s = %q; want %q", name, got, want)
			}
		}
		cc := h.Get("Cache-Control")
		age, err := strconv.Atoi(strings.TrimPrefix(cc, "private, max-age="))
		if err != nil || age < 298 || age > 301 {
			t.Errorf("Cache-Control = %q; want private, max-age=~300", cc)
		}
	})

	t.Run("Range", func(t *testing.T) {
		req, _ := http.NewRequest("GET", link, nil)
		req.Header.Set("Range", "bytes=100-199")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 206 || !bytes.Equal(body, data[100:200]) {
			t.Errorf("Range: %d, %d bytes", resp.StatusCode, len(body))
		}
		if cr := resp.Header.Get("Content-Range"); cr != "bytes 100-199/10000" {
			t.Errorf("Content-Range = %q", cr)
		}
	})

	t.Run("Head", func(t *testing.T) {
		resp, err := http.Head(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ContentLength != int64(len(data)) {
			t.Errorf("HEAD: %d, length %d", resp.StatusCode, resp.ContentLength)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
		good := hex.EncodeToString(l.sign(key, exp))
		for name, path := range map[string]string{
			"no query":       "/files/" + key,
			"no sig":         "/files/" + key + "?exp=" + exp,
			"no exp":         "/files/" + key + "?sig=" + good,
			"bad hex":        "/files/" + key + "?exp=" + exp + "&sig=zz" + good[2:],
			"short sig":      "/files/" + key + "?exp=" + exp + "&sig=" + good[:32],
			"other exp":      "/files/" + key + "?exp=" + exp + "1&sig=" + good,
			"uppercase path": "/files/" + strings.ToUpper(key) + "?exp=" + exp + "&sig=" + good,
		} {
			if code, _, _ := httpGet(t, ts.URL+path); code != 403 {
				t.Errorf("%s: %d; want 403", name, code)
			}
		}
		// A correctly signed but invalid key is still refused.
		bad := "../" + key
		req := httptest.NewRequest("GET", "/files/x", nil)
		req.URL.Path = "/files/" + bad
		req.URL.RawQuery = "exp=" + exp + "&sig=" + hex.EncodeToString(l.sign(bad, exp))
		rec := httptest.NewRecorder()
		l.Handler().ServeHTTP(rec, req)
		if rec.Code != 403 {
			t.Errorf("signed traversal key: %d; want 403", rec.Code)
		}
		// Expired by the clock.
		later := l.now().Add(6 * time.Minute)
		l2 := *l
		l2.now = func() time.Time { return later }
		rec = httptest.NewRecorder()
		l2.Handler().ServeHTTP(rec, httptest.NewRequest("GET", strings.TrimPrefix(link, ts.URL), nil))
		if rec.Code != 403 {
			t.Errorf("expired: %d; want 403", rec.Code)
		}
		// Only GET and HEAD.
		resp, err := http.Post(link, "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Errorf("POST: %d; want 405", resp.StatusCode)
		}
		// Not under /files/.
		rec = httptest.NewRecorder()
		l.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/other/"+key, nil))
		if rec.Code != 404 {
			t.Errorf("outside /files/: %d; want 404", rec.Code)
		}
	})
}

func TestLocalOnDisk(t *testing.T) {
	l, _ := newTestLocal(t)
	ctx := t.Context()

	// A blob is one file named by its key, never a raw copy in a served dir.
	key := Key("carol", "gen-d", 0, "gif")
	mustPut(t, l, key, []byte("GIF89a..."), "image/gif")
	fi, err := os.Stat(filepath.Join(l.Dir(), filepath.FromSlash(key)))
	if err != nil || fi.Size() <= 9 {
		t.Fatalf("on-disk file: %v, %v", fi, err)
	}

	// A key whose parent is a file fails cleanly.
	if _, err := l.Put(ctx, key+"/child.png", strings.NewReader("x"), "image/png", 0); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Put under a file: err = %v", err)
	}
	assertMissing(t, l, key+"/child.png")

	// A truncated file is reported as corrupt, not as missing.
	p := filepath.Join(l.Dir(), filepath.FromSlash(key))
	if err := os.Truncate(p, fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Stat(ctx, key); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Stat of a truncated file: err = %v; want a corruption error", err)
	}
	// A directory is not a blob.
	mustPut(t, l, "dir/inner.png", []byte("x"), "image/png")
	assertMissing(t, l, "dir")
}

func TestLocalSweep(t *testing.T) {
	l, _ := newTestLocal(t)
	dir := filepath.Join(l.Dir(), "owner")
	os.MkdirAll(dir, 0o750)
	old := filepath.Join(dir, tempFilePrefix+"old")
	fresh := filepath.Join(dir, tempFilePrefix+"fresh")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ago := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old, ago, ago)
	mustPut(t, l, "owner/kept.png", []byte("x"), "image/png")
	n, err := l.Sweep(t.Context(), time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Error("old temp file survived")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Error("fresh temp file removed")
	}
	assertContent(t, l, "owner/kept.png", []byte("x"), "image/png")
}

func TestValidateKey(t *testing.T) {
	for _, k := range []string{"a", "a/b/c.png", Key("o", "g", 3, "mp4"), "A-Z_a.z-0.9", strings.Repeat("k", MaxKeyLen)} {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v", k, err)
		}
	}
}
