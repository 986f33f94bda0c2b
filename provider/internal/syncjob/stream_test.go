package syncjob

import (
	"context"
	"encoding/base64"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
)

// b64Reply is a reply carrying one image of n bytes as base64 (a PNG
// header, then filler), made as it is read (the test holds no copy
// either).
func b64Reply(t testing.TB, n int) io.Reader {
	head := tinyPNG(t)
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"created":1,"data":[{"b64_json":"`))
		enc := base64.NewEncoder(base64.StdEncoding, pw)
		enc.Write(head)
		chunk := []byte(strings.Repeat("PNG-ish pixels. ", 4096))
		for left := n - len(head); left > 0; left -= len(chunk) {
			enc.Write(chunk[:min(len(chunk), left)])
		}
		enc.Close()
		pw.Write([]byte(`"}]}`))
		pw.Close()
	}()
	return pr
}

// TestStoreStreams: a 32 MiB image (43 MiB of base64) goes into the spool
// allocating a small fraction of its size: neither the reply nor the
// decoded file is ever held whole.
func TestStoreStreams(t *testing.T) {
	const size = 32 << 20
	dir := t.TempDir()
	j := Journal{Spool: provider.DirSpool(dir), Provider: "openai"}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	outs, err := j.Store(context.Background(), "g", 1, NewScanner(b64Reply(t, size), []string{"b64_json"}, nil), 0)
	runtime.ReadMemStats(&after)
	if err != nil || len(outs) != 1 {
		t.Fatalf("Store: %v %v", outs, err)
	}
	fi, err := os.Stat(dir + "/spool/openai/g/out-1-0")
	if err != nil || fi.Size() != size {
		t.Fatalf("spooled %v bytes, want %d (%v)", fi, size, err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("streamed a %d MiB image allocating %.1f MiB", size>>20, float64(alloc)/(1<<20))
	if alloc > size/8 {
		t.Fatalf("allocated %d bytes for a %d-byte image: the reply is being held", alloc, size)
	}
}
