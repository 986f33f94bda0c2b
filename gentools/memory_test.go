package gentools_test

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The largest input image accepted: 8000×5000 (40 MP) at 16 bits per
// channel with alpha, 320 MB as a whole decoded image, a few hundred KB as
// a file.
const (
	largestW, largestH = 8000, 5000
	concurrentUploads  = 4
	memoryGoalMiB      = 200
	memoryChildEnv     = "DARKROOM_MEMORY_CHILD"
)

// bigPNG streams a 16-bit RGBA PNG of w×h (a checkerboard of 64-pixel
// squares over a vertical gradient) into memory: only the file is held.
func bigPNG(tb testing.TB, w, h int) []byte {
	tb.Helper()
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(data)))
		out.Write(n[:])
		c := crc32.NewIEEE()
		c.Write([]byte(typ))
		c.Write(data)
		out.WriteString(typ)
		out.Write(data)
		binary.BigEndian.PutUint32(n[:], c.Sum32())
		out.Write(n[:])
	}
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(w)), uint32(h))
	chunk("IHDR", append(ihdr, 16, 6, 0, 0, 0))
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.DefaultCompression)
	row := make([]byte, 1+8*w)
	for y := range h {
		for x := range w {
			p := row[1+8*x:]
			on := uint16((x/64+y/64)%2) * 0xffff
			g := uint16(y * 0xffff / h)
			binary.BigEndian.PutUint16(p, on)
			binary.BigEndian.PutUint16(p[2:], g)
			binary.BigEndian.PutUint16(p[4:], 0x8000)
			binary.BigEndian.PutUint16(p[6:], 0xffff)
		}
		if _, err := zw.Write(row); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}

// procStatus reads a field of /proc/self/status in KiB.
func procStatus(tb testing.TB, field string) int64 {
	tb.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}

type memoryResult struct {
	FileBytes   int     `json:"fileBytes"`
	BaselineKiB int64   `json:"baselineKiB"` // VmHWM before the uploads
	PeakKiB     int64   `json:"peakKiB"`     // VmHWM after them
	Seconds     float64 `json:"seconds"`
}

// TestLargeInputChild is the measured process (run by runLargeInput): the
// generation tools on real parts, concurrentUploads generate calls each with
// the largest accepted image for local-animate, waiting until the local
// provider has drawn each into its video.
func TestLargeInputChild(t *testing.T) {
	out := os.Getenv(memoryChildEnv)
	if out == "" {
		t.Skip("run by TestLargeInputMemoryBounded")
	}
	r := newRig(t, nil)
	r.startRunner()
	_, cs := r.session("alice")
	file := bigPNG(t, largestW, largestH)
	data := base64.StdEncoding.EncodeToString(file)
	res := memoryResult{FileBytes: len(file), BaselineKiB: procStatus(t, "VmHWM")}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan string, concurrentUploads)
	for i := range concurrentUploads {
		wg.Go(func() {
			v := call(t, cs, "generate", map[string]any{"modelId": "local-animate", "prompt": fmt.Sprint("upload ", i),
				"durationSeconds": 2, "wait": true, "waitSeconds": 300, "inputImage": map[string]any{"data": data, "mimeType": "image/png"}})
			var g struct{ Status string }
			b, _ := json.Marshal(v.StructuredContent)
			_ = json.Unmarshal(b, &g)
			if v.IsError || g.Status != "completed" {
				errs <- fmt.Sprintf("upload %d: %s %s", i, g.Status, text(v))
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	res.Seconds = time.Since(start).Seconds()
	res.PeakKiB = procStatus(t, "VmHWM")
	b, _ := json.Marshal(res)
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// runLargeInput runs TestLargeInputChild in a fresh process, so its peak
// resident memory (VmHWM) is that of the uploads alone.
func runLargeInput(tb testing.TB) memoryResult {
	tb.Helper()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		tb.Skip("peak RSS is read from /proc (Linux)")
	}
	dir := tb.TempDir()
	path, bin := filepath.Join(dir, "memory.json"), os.Args[0]
	if raceEnabled {
		// Measure what production runs: the same tests built without the
		// race detector, whose shadow memory would multiply the heap.
		bin = filepath.Join(dir, "gentools.test")
		if out, err := exec.Command("go", "test", "-c", "-o", bin, ".").CombinedOutput(); err != nil {
			tb.Fatalf("build the child without -race: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(bin, "-test.run=^TestLargeInputChild$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), memoryChildEnv+"="+path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("child: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("child wrote no result: %v\n%s", err, out.String())
	}
	var r memoryResult
	if err := json.Unmarshal(b, &r); err != nil {
		tb.Fatal(err)
	}
	return r
}

// TestLargeInputMemoryBounded: four concurrent uploads of the largest
// accepted image (a 16-bit 8000×5000 PNG, 320 MB decoded whole), each
// drawn by the local provider, keep the process under memoryGoalMiB of
// peak RSS.
func TestLargeInputMemoryBounded(t *testing.T) {
	r := runLargeInput(t)
	goal := int64(memoryGoalMiB)
	t.Logf("%d concurrent uploads of a %d×%d 16-bit PNG (%d KB file): peak RSS %d MiB (%d MiB before the uploads), %.1f s",
		concurrentUploads, largestW, largestH, r.FileBytes>>10, r.PeakKiB>>10, r.BaselineKiB>>10, r.Seconds)
	if r.PeakKiB>>10 > goal {
		t.Errorf("peak RSS %d MiB, over the %d MiB goal", r.PeakKiB>>10, goal)
	}
}

// BenchmarkLargeInputMemory prints the figures of TestLargeInputMemoryBounded.
func BenchmarkLargeInputMemory(b *testing.B) {
	var r memoryResult
	for b.Loop() {
		r = runLargeInput(b)
	}
	b.ReportMetric(float64(r.PeakKiB)/1024, "peak-RSS-MiB")
	b.ReportMetric(float64(r.BaselineKiB)/1024, "baseline-RSS-MiB")
	b.ReportMetric(float64(r.FileBytes)/1024, "file-KiB")
}
