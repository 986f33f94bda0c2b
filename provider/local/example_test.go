package local_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
)

// With a latency scale and a clock of its own, a job goes through the
// states a real provider reports: queued for the first 15% of its latency,
// running with rising progress, then completed. local-sketch takes about a
// second at scale 1. The [fail] and [slow] prompt tokens reach the other
// paths.
func Example_timeline() {
	dir, err := os.MkdirTemp("", "darkroom-local")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	clock := testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	p, err := local.New(local.Options{Dir: dir, Scale: 1, Now: clock.Now})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	var sketch, photo provider.Model
	for _, m := range p.Models() {
		switch m.ID {
		case "local-sketch":
			sketch = m
		case "local-photo":
			photo = m
		}
	}

	job, err := p.Submit(ctx, provider.Request{IdempotencyKey: "gen-1", Model: sketch, Prompt: "a lighthouse"})
	if err != nil {
		log.Fatal(err)
	}
	failing, err := p.Submit(ctx, provider.Request{IdempotencyKey: "gen-2", Model: photo, Prompt: "a lighthouse [fail]"})
	if err != nil {
		log.Fatal(err)
	}
	for _, step := range []time.Duration{0, 75 * time.Millisecond, 425 * time.Millisecond, 500 * time.Millisecond} {
		clock.Advance(step)
		st, err := p.Status(ctx, job)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("sketch: %-9s %q\n", st.State, st.Message)
	}
	st, err := p.Status(ctx, failing)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("photo:  %-9s %q\n", st.State, st.Error)
	// Output:
	// sketch: queued    "position 3 in line"
	// sketch: queued    "position 2 in line"
	// sketch: running   "rendering"
	// sketch: completed "completed"
	// photo:  failed    "the local provider refused this prompt ([fail] token)"
}
