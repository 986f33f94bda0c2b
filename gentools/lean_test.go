package gentools_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/server/edge"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type ownerKey struct{}

// TestKeyedReadFollowsTheGeneration: the lean get_generation answers an
// unchanged generation with one key (the dispatcher keeps its encoding),
// renders what go-sdk's handler answers, takes a new key once the
// generation changes, never keys a result with signed links, and answers
// another owner as an unknown id, with no key.
func TestKeyedReadFollowsTheGeneration(t *testing.T) {
	r := newRig(t, nil)
	_, alice := r.session("alice")
	tools := gentools.New(gentools.Config{
		Service: r.svc,
		Owner:   func(ctx context.Context, _ *mcp.CallToolRequest) string { return ctx.Value(ownerKey{}).(string) },
		Budget:  r.limit,
	})
	var read edge.ReadHandler
	for _, row := range tools.Table() {
		if row.Def.Name == "get_generation" {
			read = row.Read
		}
	}
	as := func(owner, id string) edge.Reply {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"generationId": id})
		ctx := context.WithValue(context.Background(), ownerKey{}, owner)
		reply, err := read(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "get_generation", Arguments: args}})
		if err != nil {
			t.Fatal(err)
		}
		return reply
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
	first, again := as("alice", queued.GenerationID), as("alice", queued.GenerationID)
	if first.Key == nil || first.Key != again.Key || first.ID != queued.GenerationID || first.Result != nil {
		t.Fatalf("an unchanged generation: keys %v and %v, id %q, result %v; want one key, rendered on demand", first.Key, again.Key, first.ID, first.Result)
	}
	sameAsSDK(first.Answer(), queued.GenerationID)

	foreign, unknown := as("mallory", queued.GenerationID), as("mallory", "gen_unknown")
	if foreign.Key != nil || !foreign.Answer().IsError || len(foreign.Answer().Content) != len(unknown.Answer().Content) {
		t.Fatalf("another owner's read: key %v, isError %v", foreign.Key, foreign.Answer().IsError)
	}

	call(t, alice, "cancel_generation", map[string]any{"generationId": queued.GenerationID})
	cancelled := as("alice", queued.GenerationID)
	var v view
	decode(t, "get_generation", cancelled.Answer(), &v)
	if cancelled.Key == nil || cancelled.Key == first.Key || v.Status != "cancelled" {
		t.Fatalf("after the cancel: key %v (was %v), status %q; want a new key, cancelled", cancelled.Key, first.Key, v.Status)
	}
	sameAsSDK(cancelled.Answer(), queued.GenerationID)
	if again := as("alice", queued.GenerationID); again.Key != cancelled.Key {
		t.Fatal("the cancelled generation's key moved with nothing changed")
	}

	r.startRunner()
	args := sketch("completed, with a link", "")
	args["wait"], args["waitSeconds"] = true, 30
	done := generate(t, alice, args)
	if a := as("alice", done.GenerationID); a.Key != nil || a.Result == nil {
		t.Fatalf("a result with signed links: key %v; want a fresh result per read, no key", a.Key)
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
