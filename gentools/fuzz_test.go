package gentools_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/testrig"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzGenerate feeds arbitrary bytes to generate as its arguments, on
// real parts. It must never panic or fail internally; a tool error must
// create nothing; whatever it creates must be within every bound. Waiting
// is not under test: the call is generate's plain form (Prepare, then
// Create) with wait turned off in between. Seed corpus: testdata/fuzz/FuzzGenerate.
func FuzzGenerate(f *testing.F) {
	parts := testrig.New(f)
	svc := parts.Service(f, generation.Config{Now: clock()})
	ctx := context.Background()
	tools := gentools.New(gentools.Config{
		Service: svc,
		Owner:   func(context.Context, *mcp.CallToolRequest) string { return "fuzz" },
	})
	generate := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, res, err := tools.Prepare(ctx, req)
		if c == nil {
			return res, err
		}
		c.Args.Wait = false
		return tools.Create(ctx, c)
	}
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x04\x00\x00\x00\x04\x08\x00\x00\x00\x00"))
	for _, seed := range []string{
		``, `null`, `[]`, `{}`, `"x"`, `{"modelId":"local-sketch","prompt":"a lighthouse"}`,
		`{"modelId":"local-sketch","prompt":"x","seed":"one"}`,
		`{"modelId":"local-motion","prompt":"x","durationSeconds":0}`,
		`{"modelId":"local-animate","prompt":"x","inputImage":{"data":"` + png + `","mimeType":"image/png"}}`,
		`{"modelId":"local-animate","prompt":"x","inputImage":{"url":"file:///etc/passwd"}}`,
		`{"modelId":"local-sketch","prompt":"` + strings.Repeat("é", generation.MaxPromptChars+1) + `"}`,
		`{"modelId":"local-sketch","prompt":"x","wait":true,"waitSeconds":5}`,
		`{"modelId":"local-sketch","prompt":"x","idempotencyKey":"k","negativePrompt":"\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	newest := func(t *testing.T) string {
		gens, _, err := svc.List(ctx, "fuzz", "", "", 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(gens) == 0 {
			return ""
		}
		return gens[0].ID
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		before := newest(t)
		res, err := generate(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "generate", Arguments: json.RawMessage(args)}})
		if err != nil {
			t.Fatalf("internal error for %q: %v", args, err)
		}
		after := newest(t)
		if res.IsError {
			if after != before {
				t.Fatalf("a tool error created generation %s for %q", after, args)
			}
			return
		}
		g, err := svc.Get(ctx, "fuzz", after)
		if err != nil {
			t.Fatalf("%q succeeded but created nothing readable: %v", args, err)
		}
		if strings.TrimSpace(g.Prompt) == "" || utf8.RuneCountInString(g.Prompt) > generation.MaxPromptChars ||
			utf8.RuneCountInString(g.Params.NegativePrompt) > generation.MaxNegativePromptChars ||
			utf8.RuneCountInString(g.IdempotencyKey) > generation.MaxIdempotencyKeyChars ||
			g.Params.DurationSeconds < 0 || g.Params.DurationSeconds > generation.MaxDurationSeconds {
			t.Fatalf("%q created a generation out of bounds: %+v", args, g)
		}
	})
}
