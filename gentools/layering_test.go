package gentools_test

import (
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGentoolsNeverCallsUp: gentask decorates generate (Decorate) and
// gentools never calls up, neither by import nor by a hook in its
// Config. The deps check fails if gentools imports gentask (or anything
// that does, ui); the Config check fails for a field such as the former
// BeforeGenerate: a function that answers a tool call or is handed
// generate's own state.
func TestGentoolsNeverCallsUp(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, above := range []string{"gentask", "ui", "server", "cmd/darkroom"} {
		if slices.Contains(deps, "github.com/darkroom-mcp/darkroom/"+above) {
			t.Errorf("gentools depends on %s, which decorates or serves it", above)
		}
	}
	if bad := hooks(reflect.TypeFor[gentools.Config]()); len(bad) > 0 {
		t.Errorf("gentools.Config has fields that call up: %s", strings.Join(bad, ", "))
	}
}

// hooks names the function fields of cfg that call up: one that returns
// an answer to a call (an mcp.Result, a tasks.ToolOutcome) or takes
// generate's state (a gentools type, a *generation.CreateRequest).
func hooks(cfg reflect.Type) []string {
	result := reflect.TypeFor[mcp.Result]()
	upward := func(t reflect.Type) bool {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		return t.PkgPath() == reflect.TypeFor[gentools.Config]().PkgPath() ||
			t == reflect.TypeFor[generation.CreateRequest]() || t == reflect.TypeFor[tasks.ToolOutcome]() ||
			(t.Kind() != reflect.Interface && reflect.PointerTo(t).Implements(result))
	}
	var bad []string
	for f := range cfg.Fields() {
		if f.Type.Kind() != reflect.Func {
			continue
		}
		for in := range f.Type.Ins() {
			if upward(in) {
				bad = append(bad, f.Name)
			}
		}
		for o := range f.Type.Outs() {
			if upward(o) {
				bad = append(bad, f.Name)
			}
		}
	}
	return slices.Compact(bad)
}

// TestHooksFindsACallUp: the Config check finds the hook generate had.
func TestHooksFindsACallUp(t *testing.T) {
	type config struct {
		Owner          func(*mcp.CallToolRequest) string
		BeforeGenerate func(*mcp.CallToolRequest, string, *generation.CreateRequest, *gentools.GenerateArgs) (*mcp.CallToolResult, error)
		Answer         func() tasks.ToolOutcome
	}
	if got := hooks(reflect.TypeFor[config]()); !slices.Equal(got, []string{"BeforeGenerate", "Answer"}) {
		t.Fatalf("hooks = %v; want BeforeGenerate and Answer", got)
	}
}
