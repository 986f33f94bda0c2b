package gentools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/testrig"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rig is the compatibility tools on real parts: the SQLite engine, the
// local provider at latency 0, a blob folder, and (when started) the
// runner. Clients talk to it over in-memory MCP sessions, one per owner.
type rig struct {
	t     *testing.T
	svc   *generation.Service
	parts *testrig.Rig
	// budget is the daily limit every owner gets (nil: unlimited).
	budget *int64
}

// clock is noon UTC on a fixed day plus the real time elapsed since the
// rig started: it moves (the runner needs that) but never crosses the
// midnight that resets the daily budget.
func clock() func() time.Time {
	base, start := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC), time.Now()
	return func() time.Time { return base.Add(time.Since(start)) }
}

func newRig(t *testing.T, budget *int64) *rig {
	t.Helper()
	r := &rig{t: t, budget: budget}
	r.parts = testrig.New(t)
	r.svc = r.parts.Service(t, generation.Config{Now: clock(), Budget: r.limit})
	return r
}

func (r *rig) limit(context.Context, string) *int64 { return r.budget }

// startRunner drives generations to completion until the test ends.
func (r *rig) startRunner() {
	ctx, cancel := context.WithCancel(context.Background())
	runner := generation.NewRunner(r.svc, generation.RunnerConfig{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runner.Run(ctx)
	}()
	r.t.Cleanup(func() { cancel(); <-done }) // before the database closes
}

// session registers the tools on a fresh MCP server whose every caller is
// owner, and connects a client to it in memory.
func (r *rig) session(owner string) (*gentools.Tools, *mcp.ClientSession) {
	r.t.Helper()
	tools := gentools.New(gentools.Config{
		Service: r.svc,
		Owner:   func(context.Context, *mcp.CallToolRequest) string { return owner },
		Budget:  r.limit,
	})
	s := mcp.NewServer(&mcp.Implementation{Name: "darkroom-test", Version: "1"}, nil)
	tools.Register(s, nil)
	tools.RegisterResources(s)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "gentools-test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return tools, cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// decode reads a successful result's structured content into out.
func decode(t *testing.T, tool string, res *mcp.CallToolResult, out any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s: tool error: %s", tool, text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: decode %s: %v", tool, b, err)
	}
}

type view struct {
	GenerationID string `json:"generationId"`
	Status       string `json:"status"`
}

func generate(t *testing.T, cs *mcp.ClientSession, args map[string]any) view {
	t.Helper()
	var v view
	decode(t, "generate", call(t, cs, "generate", args), &v)
	if v.GenerationID == "" {
		t.Fatal("generate answered no generationId")
	}
	return v
}

func count(t *testing.T, cs *mcp.ClientSession) int {
	t.Helper()
	var out struct {
		Generations []view `json:"generations"`
	}
	decode(t, "list_generations", call(t, cs, "list_generations", map[string]any{"limit": 100}), &out)
	return len(out.Generations)
}

type credits struct {
	Spent   int64  `json:"spent"`
	Limit   *int64 `json:"limit"`
	Balance *int64 `json:"balance"`
}

func getCredits(t *testing.T, cs *mcp.ClientSession) credits {
	t.Helper()
	var c credits
	decode(t, "get_credits", call(t, cs, "get_credits", nil), &c)
	return c
}

func sketch(prompt, key string) map[string]any {
	a := map[string]any{"modelId": "local-sketch", "prompt": prompt}
	if key != "" {
		a["idempotencyKey"] = key
	}
	return a
}

// TestGenerateIdempotencyKey: a repeat of a key with the same arguments is
// the same generation, charged once; with other arguments it is a tool
// error naming the key, and nothing is created.
func TestGenerateIdempotencyKey(t *testing.T) {
	one := int64(1)
	cases := []struct {
		name    string
		budget  *int64 // daily limit (nil: unlimited)
		first   map[string]any
		second  map[string]any
		wantErr []string // substrings of the second call's error; nil: same generation
	}{
		{name: "same arguments", first: sketch("a lighthouse", "k-1"), second: sketch("a lighthouse", "k-1")},
		// The repeat costs nothing, so a spent budget does not refuse it.
		{name: "same arguments with the budget spent", budget: &one, first: sketch("a lighthouse", "k-0"), second: sketch("a lighthouse", "k-0")},
		{
			name:   "same arguments, default ratio spelled out",
			first:  sketch("a lighthouse", "k-2"),
			second: map[string]any{"modelId": "local-sketch", "prompt": "a lighthouse", "idempotencyKey": "k-2", "aspectRatio": generation.DefaultAspectRatio},
		},
		{name: "other prompt", first: sketch("a lighthouse", "k-3"), second: sketch("a windmill", "k-3"), wantErr: []string{`"k-3"`, "different arguments"}},
		{
			name:    "other aspect ratio",
			first:   sketch("a lighthouse", "k-4"),
			second:  map[string]any{"modelId": "local-sketch", "prompt": "a lighthouse", "idempotencyKey": "k-4", "aspectRatio": "1:1"},
			wantErr: []string{`"k-4"`, "different arguments"},
		},
		{
			name:    "other seed",
			first:   map[string]any{"modelId": "local-sketch", "prompt": "a lighthouse", "idempotencyKey": "k-5", "seed": 1},
			second:  map[string]any{"modelId": "local-sketch", "prompt": "a lighthouse", "idempotencyKey": "k-5", "seed": 2},
			wantErr: []string{`"k-5"`, "different arguments"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, cs := newRig(t, c.budget).session("alice")
			first := generate(t, cs, c.first)
			res := call(t, cs, "generate", c.second)
			if c.wantErr == nil {
				var again view
				decode(t, "generate", res, &again)
				if again.GenerationID != first.GenerationID {
					t.Fatalf("the repeat made generation %s, want the first one, %s", again.GenerationID, first.GenerationID)
				}
			} else {
				if !res.IsError {
					t.Fatalf("a repeat with other arguments succeeded: %s", text(res))
				}
				for _, w := range c.wantErr {
					if !strings.Contains(text(res), w) {
						t.Errorf("error %q does not contain %q", text(res), w)
					}
				}
				if !strings.Contains(text(res), first.GenerationID) {
					t.Errorf("error %q does not name the earlier generation %s", text(res), first.GenerationID)
				}
			}
			if n := count(t, cs); n != 1 {
				t.Errorf("list_generations shows %d generations, want 1", n)
			}
			if got := getCredits(t, cs); got.Spent != 1 {
				t.Errorf("spent %d credits, want 1 (charged once)", got.Spent)
			}
		})
	}
}

// TestGenerateDailyBudget: the budget holds for every generate, keyed or
// not: with 2 credits a day and a 1-credit model the third is refused and
// nothing is made.
func TestGenerateDailyBudget(t *testing.T) {
	cases := []struct {
		name string
		key  func(i int) string
	}{
		{name: "no idempotency key", key: func(int) string { return "" }},
		{name: "fresh idempotency key each time", key: func(i int) string { return fmt.Sprintf("budget-%d", i) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			two := int64(2)
			_, cs := newRig(t, &two).session("alice")
			for i := range 2 {
				generate(t, cs, sketch(fmt.Sprintf("picture %d", i), c.key(i)))
			}
			res := call(t, cs, "generate", sketch("picture 2", c.key(2)))
			if !res.IsError || !strings.Contains(text(res), "nothing was generated") {
				t.Fatalf("third generate over a budget of 2: isError=%v %q, want an error saying nothing was generated", res.IsError, text(res))
			}
			if n := count(t, cs); n != 2 {
				t.Errorf("list_generations shows %d generations, want 2", n)
			}
			got := getCredits(t, cs)
			if got.Spent != 2 || got.Limit == nil || *got.Limit != 2 || got.Balance == nil || *got.Balance != 0 {
				t.Errorf("get_credits = spent %d, limit %v, balance %v; want 2, 2, 0", got.Spent, got.Limit, got.Balance)
			}
		})
	}
}

// TestForeignIDLooksUnknown: another owner's generation id is answered
// exactly like an id that does not exist, and is left untouched.
func TestForeignIDLooksUnknown(t *testing.T) {
	r := newRig(t, nil)
	r.startRunner()
	_, alice := r.session("alice")
	_, bob := r.session("bob")
	args := sketch("alice's picture", "")
	args["wait"], args["waitSeconds"] = true, 30
	completed := generate(t, alice, args)
	if completed.Status != "completed" {
		t.Fatalf("alice's generation is %s, want completed", completed.Status)
	}
	reserved := generate(t, alice, map[string]any{"modelId": "local-animate", "prompt": "alice's clip"})
	if reserved.Status != "reserved" {
		t.Fatalf("alice's image-to-video generation is %s, want reserved", reserved.Status)
	}
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	tools := []struct {
		tool  string
		extra map[string]any
	}{
		{tool: "get_generation"},
		{tool: "wait_generation", extra: map[string]any{"timeoutSeconds": 5}},
		{tool: "download_output", extra: map[string]any{"index": 0}},
		{tool: "cancel_generation"},
		{tool: "upload_input", extra: map[string]any{"image": map[string]any{"data": png, "mimeType": "image/png"}}},
	}
	for _, target := range []view{completed, reserved} {
		for _, c := range tools {
			t.Run(c.tool+"/"+target.Status, func(t *testing.T) {
				ask := func(id string) *mcp.CallToolResult {
					a := map[string]any{"generationId": id}
					for k, v := range c.extra {
						a[k] = v
					}
					return call(t, bob, c.tool, a)
				}
				unknownID := generation.NewID()
				foreign, unknown := ask(target.GenerationID), ask(unknownID)
				if !foreign.IsError || !unknown.IsError {
					t.Fatalf("isError foreign=%v unknown=%v, want both true; foreign said %q", foreign.IsError, unknown.IsError, text(foreign))
				}
				ft := strings.ReplaceAll(text(foreign), target.GenerationID, "<ID>")
				ut := strings.ReplaceAll(text(unknown), unknownID, "<ID>")
				if ft != ut {
					t.Errorf("a foreign id is answered differently from an unknown one:\nforeign: %q\nunknown: %q", ft, ut)
				}
				if foreign.StructuredContent != nil || len(foreign.Content) != len(unknown.Content) {
					t.Errorf("foreign answer carries more than an unknown one: structured %v, %d content items vs %d",
						foreign.StructuredContent, len(foreign.Content), len(unknown.Content))
				}
			})
		}
	}
	// Nothing bob did reached alice's generations.
	for _, want := range []view{completed, reserved} {
		var got view
		decode(t, "get_generation", call(t, alice, "get_generation", map[string]any{"generationId": want.GenerationID}), &got)
		if got.Status != want.Status {
			t.Errorf("alice's generation %s is %s after bob's calls, want %s", want.GenerationID, got.Status, want.Status)
		}
	}
}

// TestArgumentErrors: wrong types and missing or out-of-range arguments are
// tool errors that say what to fix, and create nothing.
func TestArgumentErrors(t *testing.T) {
	cases := []struct {
		tool string
		args any
		want string
	}{
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": 7}, "argument prompt must be a string, not number"},
		{"generate", map[string]any{"modelId": 3, "prompt": "x"}, "argument modelId must be a string, not number"},
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "seed": "one"}, "argument seed must be an integer, not string"},
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "wait": "yes"}, "argument wait must be true or false, not string"},
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "inputImage": "a.png"}, "argument inputImage must be an object, not string"},
		{"generate", map[string]any{"prompt": "x"}, "modelId is required"},
		{"generate", map[string]any{"modelId": "local-sketch"}, "prompt is required"},
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "   "}, "prompt is required and must not be blank"},
		{"generate", map[string]any{"modelId": "no-such-model", "prompt": "x"}, `unknown modelId "no-such-model"`},
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "waitSeconds": 1}, "waitSeconds must be between 5 and 300"},
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "idempotencyKey": 12}, "argument idempotencyKey must be a string, not number"},
		{"generate", []any{"local-sketch", "x"}, "arguments must be a JSON object"},
		{"get_generation", map[string]any{}, "generationId is required"},
		{"get_generation", nil, "generationId is required"},
		{"get_generation", map[string]any{"generationId": 42}, "argument generationId must be a string, not number"},
		{"wait_generation", map[string]any{}, "generationId is required"},
		{"wait_generation", map[string]any{"generationId": "g", "timeoutSeconds": "soon"}, "argument timeoutSeconds must be an integer, not string"},
		{"wait_generation", map[string]any{"generationId": "g", "timeoutSeconds": 301}, "timeoutSeconds must be between 5 and 300"},
		{"download_output", map[string]any{}, "generationId is required"},
		{"download_output", map[string]any{"generationId": "g", "index": "first"}, "argument index must be an integer, not string"},
		{"cancel_generation", map[string]any{}, "generationId is required"},
		{"upload_input", map[string]any{}, "generationId is required"},
		{"upload_input", map[string]any{"generationId": "g"}, "image is required"},
		{"list_generations", map[string]any{"limit": 0}, "limit must be between 1 and 100"},
		{"list_generations", map[string]any{"limit": "ten"}, "argument limit must be an integer, not string"},
		{"list_generations", map[string]any{"status": "done"}, `status "done" is not reserved, queued, running, completed, failed or cancelled`},
		// An argument a tool does not know is named, never ignored.
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "numImages": 3}, `generate takes no argument "numImages"; its arguments are `},
		{"get_generation", map[string]any{"generationId": "g", "index": 1}, `get_generation takes no argument "index"; its arguments are generationId`},
		{"wait_generation", map[string]any{"generationId": "g", "index": 1}, `wait_generation takes no argument "index"; its arguments are generationId and timeoutSeconds`},
		{"download_output", map[string]any{"generationId": "g", "timeoutSeconds": 5}, `download_output takes no argument "timeoutSeconds"; its arguments are generationId and index`},
		{"cancel_generation", map[string]any{"generationId": "g", "force": true}, `cancel_generation takes no argument "force"`},
		{"list_generations", map[string]any{"page": 2}, `list_generations takes no argument "page"; its arguments are cursor, limit and status`},
		{"list_models", map[string]any{"kind": "video"}, `list_models takes no argument "kind"`},
		{"get_credits", map[string]any{"owner": "bob"}, `get_credits takes no argument "owner"`},
		// Choices in words, never Go's [2 4 6].
		{"generate", map[string]any{"modelId": "local-motion", "prompt": "x", "durationSeconds": 3}, "durationSeconds 3 is not offered by local-motion; choose 2, 4 or 6"},
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "aspectRatio": "2:1"}, `aspectRatio "2:1" is not offered by local-sketch; choose 1:1, 16:9, 9:16, 4:3, 3:4 or 21:9`},
	}
	_, cs := newRig(t, nil).session("alice")
	for _, c := range cases {
		b, _ := json.Marshal(c.args)
		t.Run(c.tool+" "+string(b), func(t *testing.T) {
			res := call(t, cs, c.tool, c.args)
			if !res.IsError {
				t.Fatalf("isError false: %s", text(res))
			}
			if !strings.Contains(text(res), c.want) {
				t.Errorf("error %q, want it to contain %q", text(res), c.want)
			}
		})
	}
	if n := count(t, cs); n != 0 {
		t.Errorf("bad arguments created %d generation(s)", n)
	}
}

// TestRateClass: each tool draws from the bucket its definition names.
func TestRateClass(t *testing.T) {
	tools, cs := newRig(t, nil).session("alice")
	// Each row's own class, and none for what is no row; every row names
	// one, generate (it spends credits) create.
	want := map[string]string{"no_such_tool": "", "": ""}
	for _, row := range tools.Table() {
		if row.Class != gentools.ClassPoll && row.Class != gentools.ClassCreate {
			t.Errorf("%s names class %q", row.Def.Name, row.Class)
		}
		want[row.Def.Name] = row.Class
	}
	if want["generate"] != gentools.ClassCreate {
		t.Errorf("generate draws from %q; it spends credits", want["generate"])
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		t.Run(name, func(t *testing.T) {
			if got := tools.RateClass(name); got != want[name] {
				t.Errorf("RateClass(%q) = %q, want %q", name, got, want[name])
			}
		})
	}
	// Every registered tool is in the table: a new one must choose.
	listed, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range listed.Tools {
		if _, ok := want[tool.Name]; !ok {
			t.Errorf("tool %s is registered but not in this test's table", tool.Name)
		}
	}
	if len(listed.Tools) != len(tools.Table()) {
		t.Errorf("%d tools registered, the table has %d rows", len(listed.Tools), len(tools.Table()))
	}
}
