package google_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/google"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestHostileReplies: a Gemini image reply with more images than
// asked (the probe saw 50 stored for one), an image without end, or a
// gigabyte of zeros leaves in the spool only the images charged for,
// within their bound; a refusal is permanent.
func TestHostileReplies(t *testing.T) {
	cases := []struct {
		name, model, prompt string
		wantOuts            int
		wantErr             string
	}{
		{name: "flash: 50 for one", model: "google-gemini-3.1-flash-image", prompt: "a fox [many:50]", wantOuts: 1},
		{name: "pro: 50 for one", model: "google-gemini-3-pro-image", prompt: "a heron [many:50]", wantOuts: 1},
		{name: "flash: endless", model: "google-gemini-3.1-flash-image", prompt: "a fox [endless]", wantErr: "larger than the 8 MiB"},
		{name: "flash: 1 GiB of zeros", model: "google-gemini-3.1-flash-image", prompt: "a fox [zeros:1073741824]", wantErr: "not an image"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			em := emulator.New(emulator.Options{Clock: emulator.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))})
			t.Cleanup(em.Close)
			dir := t.TempDir()
			p, err := google.New(google.Config{Key: "gemini_test", BaseURL: em.Google.URL, Spool: provider.DirSpool(dir), Models: catalog.Default(), RequestsPerMinute: -1, Now: em.Now})
			if err != nil {
				t.Fatal(err)
			}
			google.SetMaxOutputBytes(p, 8<<20) // the bound's rule, cheaper
			var m provider.Model
			for _, pm := range p.Models() {
				if pm.ID == c.model {
					m = pm
				}
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			job, err := p.Submit(context.Background(), provider.Request{IdempotencyKey: "g1", Model: m, Prompt: c.prompt, AspectRatio: "1:1"})
			runtime.ReadMemStats(&after)
			files := 0
			filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() && filepath.Base(p) != "journal.json" {
					files++
				}
				return nil
			})
			t.Logf("%d files left in the spool; allocated %.1f MiB (emulator included); err %v", files, float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), err)
			if c.wantErr != "" {
				var perm *provider.PermanentError
				if !errors.As(err, &perm) || !strings.Contains(perm.Message, c.wantErr) || files != 0 {
					t.Fatalf("Submit err = %v with %d files spooled, want a refusal saying %q and none", err, files, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, err := p.Status(context.Background(), job)
			if err != nil || len(st.Outputs) != c.wantOuts || files != c.wantOuts {
				t.Fatalf("%d outputs (%d spooled), %v; want %d", len(st.Outputs), files, err, c.wantOuts)
			}
		})
	}
}
