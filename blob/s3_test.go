package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestS3Contract(t *testing.T) {
	ep := s3Endpoint(t)
	testStore(t, func(t *testing.T) Store { return newTestS3(t, ep, nil) })
}

func TestS3ContractWithPrefix(t *testing.T) {
	ep := s3Endpoint(t)
	s := newTestS3(t, ep, func(c *S3Config) { c.Prefix = "darkroom/blobs" })
	ctx := t.Context()
	key := Key("alice", "gen-p", 0, "png")
	mustPut(t, s, key, testData(big, 1), "image/png")
	full := "darkroom/blobs/" + key
	if _, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: &full}); err != nil {
		t.Errorf("object not stored under the prefix: %v", err)
	}
	if d := s.debris(t); len(d) > 0 {
		t.Errorf("debris: %v", d)
	}
	if _, err := NewS3(ctx, S3Config{Bucket: "b", Prefix: "../x"}); err == nil {
		t.Error("NewS3 accepted prefix ../x")
	}
}

func TestS3WrongCredentials(t *testing.T) {
	ep := s3Endpoint(t)
	good := newTestS3(t, ep, nil)
	ctx := t.Context()
	key := Key("alice", "gen-w", 0, "png")
	mustPut(t, good, key, []byte("secret picture"), "image/png")

	access, _ := testCreds()
	bad, err := NewS3(ctx, S3Config{
		Bucket: good.cfg.Bucket, Endpoint: ep, Region: "us-east-1", PathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(access, "not-the-secret", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Put(ctx, Key("mallory", "gen-w", 0, "png"), strings.NewReader("x"), "image/png", 0); err == nil {
		t.Error("Put with a wrong secret succeeded")
	}
	if _, err := bad.Stat(ctx, key); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Stat with a wrong secret: err = %v; want an auth error, not ErrNotFound", err)
	}
	if rc, _, err := bad.Open(ctx, key); err == nil {
		rc.Close()
		t.Error("Open with a wrong secret succeeded")
	}
	err = bad.CheckBucket(ctx)
	if err == nil || !strings.Contains(err.Error(), good.cfg.Bucket) || !strings.Contains(err.Error(), ep) {
		t.Errorf("CheckBucket with a wrong secret: %v; want an error naming bucket and endpoint", err)
	}
	link, _, err := bad.SignedURL(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := httpGet(t, link); code != 403 {
		t.Errorf("GET of a link signed with a wrong secret: %d; want 403", code)
	}
}

func TestS3CheckAndCreateBucket(t *testing.T) {
	ep := s3Endpoint(t)
	s := newTestS3(t, ep, nil)
	ctx := t.Context()
	if err := s.CheckBucket(ctx); err != nil {
		t.Errorf("CheckBucket: %v", err)
	}
	if err := s.CreateBucket(ctx); err != nil {
		t.Errorf("CreateBucket of an existing bucket: %v", err)
	}
	if d := s.debris(t); len(d) > 0 {
		t.Errorf("CheckBucket left %v", d)
	}
	access, secret := testCreds()
	missing, err := NewS3(ctx, S3Config{
		Bucket: "darkroom-missing-" + randomHex()[:12], Endpoint: ep, PathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(access, secret, ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = missing.CheckBucket(ctx)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), missing.cfg.Bucket) {
		t.Errorf("CheckBucket of a missing bucket: %v", err)
	}
	if _, err := missing.Stat(ctx, "a/b"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Stat in a missing bucket: %v; want an error other than ErrNotFound", err)
	}
	if rc, _, err := missing.Open(ctx, "a/b"); err == nil || errors.Is(err, ErrNotFound) {
		if rc != nil {
			rc.Close()
		}
		t.Errorf("Open in a missing bucket: %v; want an error other than ErrNotFound", err)
	}
}

func TestS3PublicEndpoint(t *testing.T) {
	ep := s3Endpoint(t)
	u, _ := url.Parse(ep)
	public := "http://localhost:" + u.Port()
	s := newTestS3(t, ep, func(c *S3Config) { c.PublicEndpoint = public })
	key := Key("alice", "gen-pub", 0, "png")
	mustPut(t, s, key, []byte("via the public host"), "image/png")
	link, _, err := s.SignedURL(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, public+"/") {
		t.Errorf("link %s is not on the public endpoint %s", link, public)
	}
	if code, _, body := httpGet(t, link); code != 200 || string(body) != "via the public host" {
		t.Errorf("GET %s: %d %q", link, code, body)
	}
}

func TestS3MultipartCopy(t *testing.T) {
	ep := s3Endpoint(t)
	s := newTestS3(t, ep, nil)
	s.maxCopyObject, s.copyPartSize = MinS3PartSize, MinS3PartSize // force UploadPartCopy
	key := Key("alice", "gen-mpc", 0, "mp4")
	data := testData(big, 11)
	mustPut(t, s, key, data, "video/mp4")
	assertContent(t, s, key, data, "video/mp4")
	if d := s.debris(t); len(d) > 0 {
		t.Errorf("debris: %v", d)
	}
}

func TestS3Sweep(t *testing.T) {
	ep := s3Endpoint(t)
	s := newTestS3(t, ep, func(c *S3Config) { c.Prefix = "p" })
	ctx := t.Context()
	key := Key("alice", "gen-sw", 0, "png")
	mustPut(t, s, key, []byte("kept"), "image/png")
	leftover := s.prefix + stagingDir + "crashed"
	if _, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.cfg.Bucket, Key: &leftover, Body: strings.NewReader("partial")}); err != nil {
		t.Fatal(err)
	}
	upload := s.prefix + stagingDir + "unfinished"
	if _, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: &upload}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx, time.Hour); err != nil || n != 0 {
		t.Errorf("Sweep(1h) = %d, %v; want nothing that young removed", n, err)
	}
	if n, err := s.Sweep(ctx, -time.Minute); err != nil || n != 2 {
		t.Errorf("Sweep = %d, %v; want 2", n, err)
	}
	if d := s.debris(t); len(d) > 0 {
		t.Errorf("after Sweep: %v", d)
	}
	assertContent(t, s, key, []byte("kept"), "image/png")
}

// TestS3Outage kills its own versitygw in the middle of a multipart Put:
// Put must fail, nothing may be linked, and after a restart a retried Put
// must succeed.
func TestS3Outage(t *testing.T) {
	g := startVersityGW(t)
	s := newTestS3(t, g.endpoint(), nil)
	ctx := t.Context()
	key := Key("alice", "gen-outage", 0, "mp4")
	const size = 64 << 20

	reached := make(chan struct{})
	body := newPatternReader(size, 16<<20, func() { close(reached) })
	errc := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, key, body, "video/mp4", 0)
		errc <- err
	}()
	select {
	case <-reached:
	case err := <-errc:
		t.Fatalf("Put ended before the outage: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("Put did not read 16 MiB in a minute")
	}
	g.stop()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("Put succeeded although the server died mid-upload")
		}
		t.Logf("Put during the outage: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("Put did not return within 2 minutes of the outage")
	}

	// While the server is down nothing looks "missing": errors are errors.
	if _, err := s.Stat(ctx, key); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Stat during the outage: %v; want an error other than ErrNotFound", err)
	}
	if _, err := s.Put(ctx, key, strings.NewReader("small"), "text/plain", 0); err == nil {
		t.Error("small Put during the outage succeeded")
	}

	g.restart(t)
	assertMissing(t, s, key)
	// The interrupted multipart upload is invisible; Sweep clears it.
	n, err := s.Sweep(ctx, -time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Sweep after restart removed %d leftovers", n)
	if d := s.debris(t); len(d) > 0 {
		t.Errorf("after Sweep: %v", d)
	}

	retry := newPatternReader(size, -1, nil)
	obj, err := s.Put(ctx, key, retry, "video/mp4", 0)
	if err != nil {
		t.Fatalf("retried Put after restart: %v", err)
	}
	want := newPatternReader(size, -1, nil)
	h := sha256.New()
	io.Copy(h, want)
	if sum := hex.EncodeToString(h.Sum(nil)); obj.SHA256 != sum || obj.Size != size {
		t.Fatalf("retried Put = %+v; want %d bytes, sha256 %s", obj, size, sum)
	}
	rc, _, err := s.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if n, err := io.Copy(io.Discard, rc); err != nil || n != size {
		t.Fatalf("read back %d bytes: %v", n, err)
	}
}

// patternReader streams n pseudo-random bytes from a 1 MiB block without
// buffering the body. once is called when mark bytes have been read.
type patternReader struct {
	remaining, read, mark int64
	block                 []byte
	off                   int
	once                  func()
}

var patternBlock = testData(1<<20, 42)

func newPatternReader(n, mark int64, once func()) *patternReader {
	return &patternReader{remaining: n, mark: mark, block: patternBlock, once: once}
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.remaining <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.remaining {
		b = b[:p.remaining]
	}
	n := copy(b, p.block[p.off:])
	p.off = (p.off + n) % len(p.block)
	p.remaining -= int64(n)
	p.read += int64(n)
	if p.once != nil && p.read >= p.mark {
		p.once()
		p.once = nil
	}
	return n, nil
}

// memPeak samples heap and RSS growth above a baseline taken after a GC.
type memPeak struct {
	stop, done                 chan struct{}
	baseHeap, baseLive, baseRS uint64
	peakHeap, peakLive, peakRS atomic.Uint64
}

var memSamples = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}

func readMem() (heap, live, rss uint64) {
	s := append([]metrics.Sample(nil), memSamples...)
	metrics.Read(s)
	heap, live = s[0].Value.Uint64(), s[1].Value.Uint64()
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseUint(f[1], 10, 64)
			rss = pages * uint64(os.Getpagesize())
		}
	}
	return
}

func startMemPeak() *memPeak {
	runtime.GC()
	m := &memPeak{stop: make(chan struct{}), done: make(chan struct{})}
	m.baseHeap, m.baseLive, m.baseRS = readMem()
	go func() {
		defer close(m.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			h, l, r := readMem()
			for _, p := range []struct {
				peak *atomic.Uint64
				v    uint64
			}{{&m.peakHeap, h}, {&m.peakLive, l}, {&m.peakRS, r}} {
				if p.v > p.peak.Load() {
					p.peak.Store(p.v)
				}
			}
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

// finish returns the peak growth in MiB of heap objects (live and not yet
// swept), of the live heap as of the last GC, and of the resident set.
func (m *memPeak) finish() (heap, live, rss float64) {
	close(m.stop)
	<-m.done
	growth := func(peak, base uint64) float64 {
		if peak < base {
			return 0
		}
		return float64(peak-base) / (1 << 20)
	}
	return growth(m.peakHeap.Load(), m.baseHeap), growth(m.peakLive.Load(), m.baseLive), growth(m.peakRS.Load(), m.baseRS)
}

// TestS3PutBoundedMemory streams 128 MiB with the default part size and
// concurrency and checks that the live heap stays within the budget.
func TestS3PutBoundedMemory(t *testing.T) {
	ep := s3Endpoint(t)
	if testing.Short() {
		t.Skip("short mode")
	}
	s := newTestS3(t, ep, func(c *S3Config) { c.PartSize, c.Concurrency = 0, 0 })
	m := startMemPeak()
	_, err := s.Put(t.Context(), "big/upload.bin", newPatternReader(128<<20, -1, nil), "application/octet-stream", 0)
	heap, live, rss := m.finish()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("128 MiB Put: peak heap growth %.1f MiB, live %.1f MiB, RSS %.1f MiB", heap, live, rss)
	// Concurrency pooled parts and the look-ahead part: 5 × 8 MiB =
	// 40 MiB, plus slack for the SDK.
	if live > 48 || heap > 56 {
		t.Errorf("heap grew by %.1f MiB (live %.1f MiB); want about 40 MiB at most", heap, live)
	}
}

// BenchmarkS3PutLarge uploads DARKROOM_BENCH_S3_BYTES (default 256 MiB)
// from a non-buffering reader with the default part size and concurrency,
// and reports peak memory growth in MiB.
func BenchmarkS3PutLarge(b *testing.B) {
	ep := s3Endpoint(b)
	size := int64(256 << 20)
	if v := os.Getenv("DARKROOM_BENCH_S3_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("DARKROOM_BENCH_S3_BYTES: %v", err)
		}
		size = n
	}
	s := newTestS3(b, ep, func(c *S3Config) { c.PartSize, c.Concurrency = 0, 0 })
	ctx := context.Background()
	b.SetBytes(size)
	var heap, live, rss float64
	for i := 0; b.Loop(); i++ {
		key := "bench/" + strconv.Itoa(i) + "-" + strconv.FormatUint(rand.Uint64(), 16)
		m := startMemPeak()
		_, err := s.Put(ctx, key, newPatternReader(size, -1, nil), "application/octet-stream", 0)
		h, l, r := m.finish()
		if err != nil {
			b.Fatal(err)
		}
		heap, live, rss = max(heap, h), max(live, l), max(rss, r)
		b.StopTimer()
		s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(s.prefix + key)})
		b.StartTimer()
	}
	b.ReportMetric(heap, "peak-heap-MiB")
	b.ReportMetric(live, "peak-live-MiB")
	b.ReportMetric(rss, "peak-rss-MiB")
}
