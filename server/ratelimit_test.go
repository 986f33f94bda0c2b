package server

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/darkroom-mcp/darkroom/compat"
	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/testrig"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// realTools builds the compatibility tools on real parts and registers
// them through New, as darkroom does; it returns the tools and the names
// the server lists.
func realTools(t *testing.T) (*compat.Tools, []string) {
	t.Helper()
	svc := testrig.New(t).Service(t, generation.Config{})
	tools := compat.New(compat.Config{Service: svc, Owner: ToolOwner})
	s := New(Config{Version: "test", Tools: tools})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "ratelimit-test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close(); _ = ss.Wait() }()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return tools, names
}

// TestClassOf: every method of the table and every tool has its class;
// what the table does not list (tasks/list, an unknown method, a
// response) and a tool that names none are never free.
func TestClassOf(t *testing.T) {
	tools, names := realTools(t)
	want := map[string]string{
		"generate":          compat.ClassCreate,
		"get_generation":    compat.ClassPoll,
		"wait_generation":   compat.ClassPoll,
		"list_generations":  compat.ClassPoll,
		"download_output":   compat.ClassPoll,
		"list_models":       compat.ClassPoll,
		"get_credits":       compat.ClassPoll,
		"upload_input":      compat.ClassPoll,
		"cancel_generation": compat.ClassPoll,
	}
	for _, n := range names {
		if _, ok := want[n]; !ok {
			t.Errorf("the server lists tool %s, which this test does not know", n)
		}
	}
	if len(names) != len(want) {
		t.Errorf("the server lists %d tools (%v), want %d", len(names), names, len(want))
	}

	type tc struct {
		name string
		env  tasks.Message
		want string
	}
	var cases []tc
	for _, n := range slices.Sorted(maps.Keys(want)) {
		cases = append(cases, tc{"tools/call " + n, tasks.Message{Method: "tools/call", Name: n}, want[n]})
	}
	cases = append(cases,
		tc{"tools/call unknown tool", tasks.Message{Method: "tools/call", Name: "no_such_tool"}, compat.ClassCreate},
		tc{"tools/call without a name", tasks.Message{Method: "tools/call"}, compat.ClassCreate},
		tc{"tasks/get", tasks.Message{Method: "tasks/get"}, compat.ClassPoll},
		// A name on a non-call method is not a tool call.
		tc{"tasks/get naming a tool", tasks.Message{Method: "tasks/get", Name: "generate"}, compat.ClassPoll},
		tc{"tools/list naming a tool", tasks.Message{Method: "tools/list", Name: "generate"}, compat.ClassPoll},
		tc{"subscriptions/listen", tasks.Message{Method: "subscriptions/listen"}, classListen},
		tc{"tasks/list", tasks.Message{Method: "tasks/list"}, compat.ClassPoll},
		tc{"tasks/result", tasks.Message{Method: "tasks/result"}, compat.ClassPoll},
		tc{"tasks/cancel", tasks.Message{Method: "tasks/cancel"}, compat.ClassPoll},
		tc{"tasks/update", tasks.Message{Method: "tasks/update"}, compat.ClassPoll},
		tc{"tools/list", tasks.Message{Method: "tools/list"}, compat.ClassPoll},
		tc{"initialize", tasks.Message{Method: "initialize"}, compat.ClassPoll},
		tc{"notifications/initialized", tasks.Message{Method: "notifications/initialized"}, compat.ClassPoll},
		tc{"ping", tasks.Message{Method: "ping"}, compat.ClassPoll},
		tc{"unknown method", tasks.Message{Method: "no/such"}, compat.ClassPoll},
		tc{"method case differs", tasks.Message{Method: "Tasks/Get"}, compat.ClassPoll},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := c.env
			if got := ClassOf(env.Method, env.Name, tools.RateClass); got != c.want {
				t.Errorf("ClassOf(%+v) = %q, want %q", c.env, got, c.want)
			}
		})
	}
}

// TestClassOfAsksToolClass: for a tool call ClassOf answers exactly what
// toolClass says for the call's tool name (create when it says nothing),
// and asks about nothing else.
func TestClassOfAsksToolClass(t *testing.T) {
	cases := []struct {
		env       tasks.Message
		answer    string
		want      string
		wantAsked []string
	}{
		{tasks.Message{Method: "tools/call", Name: "generate"}, compat.ClassCreate, compat.ClassCreate, []string{"generate"}},
		{tasks.Message{Method: "tools/call", Name: "get_generation"}, compat.ClassPoll, compat.ClassPoll, []string{"get_generation"}},
		{tasks.Message{Method: "tools/call", Name: "my_tool"}, "custom", "custom", []string{"my_tool"}},
		{tasks.Message{Method: "tools/call", Name: "generate"}, "", compat.ClassCreate, []string{"generate"}},
		{tasks.Message{Method: "tasks/get", Name: "generate"}, compat.ClassCreate, compat.ClassPoll, nil},
		{tasks.Message{Method: "tools/list", Name: "generate"}, compat.ClassCreate, compat.ClassPoll, nil},
	}
	for _, c := range cases {
		t.Run(c.env.Method+" "+c.env.Name, func(t *testing.T) {
			var asked []string
			toolClass := func(name string) string {
				asked = append(asked, name)
				return c.answer
			}
			env := c.env
			if got := ClassOf(env.Method, env.Name, toolClass); got != c.want {
				t.Errorf("ClassOf = %q, want %q", got, c.want)
			}
			if !slices.Equal(asked, c.wantAsked) {
				t.Errorf("toolClass asked about %q, want %q", asked, c.wantAsked)
			}
		})
	}
}
