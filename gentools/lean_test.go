package gentools_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type ownerKey struct{}

// TestSharedReadFollowsTheGeneration: the lean get_generation shares one
// result while a generation is unchanged, answers as go-sdk's handler does,
// renders anew once the generation changes, never shares a result with
// signed links, and never answers from the memo for another owner.
func TestSharedReadFollowsTheGeneration(t *testing.T) {
	r := newRig(t, nil)
	_, alice := r.session("alice")
	tools := gentools.New(gentools.Config{
		Service: r.svc,
		Owner:   func(ctx context.Context, _ *mcp.CallToolRequest) string { return ctx.Value(ownerKey{}).(string) },
		Budget:  r.limit,
	})
	var read tasks.ReadHandler
	for _, row := range tools.Table() {
		if row.Def.Name == "get_generation" {
			read = row.Read
		}
	}
	as := func(owner, id string) (*mcp.CallToolResult, bool) {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"generationId": id})
		ctx := context.WithValue(context.Background(), ownerKey{}, owner)
		res, shared, err := read(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "get_generation", Arguments: args}})
		if err != nil {
			t.Fatal(err)
		}
		return res, shared
	}
	// sameAsSDK compares res with what go-sdk's handler answers alice now,
	// less what go-sdk adds on the way out (the byte-for-byte comparison on
	// the wire is cmd/darkroom's TestLeanReadsAnswerAsGoSDK).
	sameAsSDK := func(res *mcp.CallToolResult, id string) {
		t.Helper()
		want := asJSON(t, call(t, alice, "get_generation", map[string]any{"generationId": id})).(map[string]any)
		delete(want, "_meta")
		delete(want, "resultType")
		if got := asJSON(t, res); !reflect.DeepEqual(got, any(want)) {
			t.Fatalf("lean answer differs from go-sdk's:\n lean:   %v\n go-sdk: %v", got, want)
		}
	}

	queued := generate(t, alice, sketch("queued, then cancelled", ""))
	first, shared := as("alice", queued.GenerationID)
	again, sharedAgain := as("alice", queued.GenerationID)
	if !shared || !sharedAgain || first != again {
		t.Fatalf("an unchanged generation: shared %v/%v, same result %v; want one shared result", shared, sharedAgain, first == again)
	}
	sameAsSDK(first, queued.GenerationID)

	foreign, fshared := as("mallory", queued.GenerationID)
	unknown, _ := as("mallory", "gen_unknown")
	if fshared || !foreign.IsError || foreign == first || len(foreign.Content) != len(unknown.Content) {
		t.Fatalf("another owner's read: shared %v, isError %v, the owner's result %v", fshared, foreign.IsError, foreign == first)
	}

	call(t, alice, "cancel_generation", map[string]any{"generationId": queued.GenerationID})
	cancelled, shared := as("alice", queued.GenerationID)
	var v view
	decode(t, "get_generation", cancelled, &v)
	if cancelled == first || !shared || v.Status != "cancelled" {
		t.Fatalf("after the cancel: a new result %v, shared %v, status %q; want a new shared cancelled one", cancelled != first, shared, v.Status)
	}
	sameAsSDK(cancelled, queued.GenerationID)
	if again, _ := as("alice", queued.GenerationID); again != cancelled {
		t.Fatal("the cancelled generation's result is not shared")
	}

	r.startRunner()
	args := sketch("completed, with a link", "")
	args["wait"], args["waitSeconds"] = true, 30
	done := generate(t, alice, args)
	a, sharedA := as("alice", done.GenerationID)
	b, sharedB := as("alice", done.GenerationID)
	if sharedA || sharedB || a == b {
		t.Fatalf("a result with signed links: shared %v/%v, same %v; want fresh per read", sharedA, sharedB, a == b)
	}
}

// asJSON is a result as a client decodes it, for comparison.
func asJSON(t *testing.T, res *mcp.CallToolResult) any {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
