package provider_test

import (
	"context"
	"fmt"
	"image/png"
	"log"
	"os"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
)

// A Provider's life cycle, on the built-in local provider with no latency:
// pick a model, submit a request, poll Status until the job ends, then
// stream the output. darkroom's runner does the same, persisting the Job
// between calls.
func Example() {
	dir, err := os.MkdirTemp("", "darkroom-provider")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var p provider.Provider
	p, err = local.New(local.Options{Dir: dir, Scale: 0}) // 0: jobs complete at once
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	var model provider.Model
	for _, m := range p.Models() {
		fmt.Printf("%s/%s: %s, %d credits\n", m.Provider, m.ID, m.Kind, m.Credits)
		if m.ID == "local-sketch" {
			model = m
		}
	}

	job, err := p.Submit(ctx, provider.Request{
		IdempotencyKey: "gen-1", // a retried Submit with this key returns the same job
		Model:          model,
		Prompt:         "a lighthouse at dusk",
		AspectRatio:    "16:9",
		Seed:           42,
	})
	if err != nil {
		log.Fatal(err)
	}

	var st provider.Status
	for {
		if st, err = p.Status(ctx, job); err != nil {
			log.Fatal(err)
		}
		if st.State.Terminal() {
			break
		}
		time.Sleep(model.ExpectedDuration / 4)
	}
	fmt.Println("state:", st.State, st.Message)
	if st.State != provider.StateCompleted {
		log.Fatal(st.Error)
	}

	out := st.Outputs[0]
	rc, err := p.OpenOutput(ctx, job, out)
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	cfg, err := png.DecodeConfig(rc)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("output: %s, %d×%d\n", out.MimeType, cfg.Width, cfg.Height)
	// Output:
	// local/local-sketch: image, 1 credits
	// local/local-photo: image, 4 credits
	// local/local-edit: image, 4 credits
	// local/local-motion: video, 20 credits
	// local/local-animate: video, 20 credits
	// state: completed completed
	// output: image/png, 1024×576
}
