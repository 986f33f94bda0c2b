package server

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/internal/methods"
	"github.com/darkroom-mcp/darkroom/internal/testclock"
	"github.com/darkroom-mcp/darkroom/internal/testrig"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// realTools builds the compatibility tools on real parts and registers
// them through New, as darkroom does; it returns the tools and the names
// the server lists.
func realTools(t *testing.T) (*gentools.Tools, []string) {
	t.Helper()
	svc := testrig.New(t).Service(t, generation.Config{})
	tools := gentools.New(gentools.Config{Service: svc, Owner: ToolOwner})
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
	// Each tool's class is its row's (a tool that names none: create).
	want := map[string]string{}
	for _, row := range tools.Table() {
		want[row.Def.Name] = cmp.Or(row.Class, gentools.ClassCreate)
	}
	if want["generate"] != gentools.ClassCreate {
		t.Errorf("generate draws from %q; it spends credits", want["generate"])
	}
	for _, n := range names {
		if _, ok := want[n]; !ok {
			t.Errorf("the server lists tool %s, which is no row of the table", n)
		}
	}

	type tc struct {
		name string
		env  envelope.Message
		want string
	}
	var cases []tc
	for _, n := range slices.Sorted(maps.Keys(want)) {
		cases = append(cases, tc{"tools/call " + n, envelope.Message{Method: "tools/call", Name: n}, want[n]})
	}
	cases = append(cases,
		tc{"tools/call unknown tool", envelope.Message{Method: "tools/call", Name: "no_such_tool"}, gentools.ClassCreate},
		tc{"tools/call without a name", envelope.Message{Method: "tools/call"}, gentools.ClassCreate},
		tc{"tasks/get", envelope.Message{Method: "tasks/get"}, gentools.ClassPoll},
		// A name on a non-call method is not a tool call.
		tc{"tasks/get naming a tool", envelope.Message{Method: "tasks/get", Name: "generate"}, gentools.ClassPoll},
		tc{"tools/list naming a tool", envelope.Message{Method: "tools/list", Name: "generate"}, gentools.ClassPoll},
		tc{"subscriptions/listen", envelope.Message{Method: "subscriptions/listen"}, methods.ClassListen},
		tc{"tasks/list", envelope.Message{Method: "tasks/list"}, gentools.ClassPoll},
		tc{"tasks/result", envelope.Message{Method: "tasks/result"}, gentools.ClassPoll},
		tc{"tasks/cancel", envelope.Message{Method: "tasks/cancel"}, gentools.ClassPoll},
		tc{"tasks/update", envelope.Message{Method: "tasks/update"}, gentools.ClassPoll},
		tc{"tools/list", envelope.Message{Method: "tools/list"}, gentools.ClassPoll},
		tc{"initialize", envelope.Message{Method: "initialize"}, gentools.ClassPoll},
		tc{"notifications/initialized", envelope.Message{Method: "notifications/initialized"}, gentools.ClassPoll},
		tc{"ping", envelope.Message{Method: "ping"}, gentools.ClassPoll},
		tc{"unknown method", envelope.Message{Method: "no/such"}, gentools.ClassPoll},
		tc{"method case differs", envelope.Message{Method: "Tasks/Get"}, gentools.ClassPoll},
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
		env       envelope.Message
		answer    string
		want      string
		wantAsked []string
	}{
		{envelope.Message{Method: "tools/call", Name: "generate"}, gentools.ClassCreate, gentools.ClassCreate, []string{"generate"}},
		{envelope.Message{Method: "tools/call", Name: "get_generation"}, gentools.ClassPoll, gentools.ClassPoll, []string{"get_generation"}},
		{envelope.Message{Method: "tools/call", Name: "my_tool"}, "custom", "custom", []string{"my_tool"}},
		{envelope.Message{Method: "tools/call", Name: "generate"}, "", gentools.ClassCreate, []string{"generate"}},
		{envelope.Message{Method: "tasks/get", Name: "generate"}, gentools.ClassCreate, gentools.ClassPoll, nil},
		{envelope.Message{Method: "tools/list", Name: "generate"}, gentools.ClassCreate, gentools.ClassPoll, nil},
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

// TestChargeByWhatIsAsked: a listen costs a poll per ListenIDsPerToken task
// ids (the largest, past the burst, the whole bucket; two in one body
// never pass together); every body costs its bytes, upload_input's
// image included, on top of its call.
func TestChargeByWhatIsAsked(t *testing.T) {
	ids := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"notifications":{"taskIds":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"t%d"`, i)
		}
		b.WriteString(`]}}`)
		return []byte(b.String())
	}
	listen := func(n int) envelope.Message {
		return envelope.Message{Method: "subscriptions/listen", Call: true, Request: true, Params: ids(n)}
	}
	upload := envelope.Message{Method: "tools/call", Name: "upload_input", Call: true}
	toolClass := func(string) string { return gentools.ClassPoll }
	cases := []struct {
		name      string
		msgs      []envelope.Message
		bytes     int
		wantOK    bool
		wantPolls float64 // poll tokens left of the burst of 20
		wantBytes float64 // bytes left of the burst of 1000
	}{
		{"listen on 3 tasks", []envelope.Message{listen(3)}, 0, true, 19, 1000},
		{"listen on 50 tasks", []envelope.Message{listen(50)}, 0, true, 19, 1000},
		{"listen on 51 tasks", []envelope.Message{listen(51)}, 0, true, 18, 1000},
		{"listen on 500 tasks", []envelope.Message{listen(500)}, 0, true, 10, 1000},
		{"listen on 1000 tasks", []envelope.Message{listen(1000)}, 0, true, 0, 1000},
		{"listen on 5000 tasks: the whole bucket", []envelope.Message{listen(5000)}, 0, true, 0, 1000},
		{"two listens on 1000 in one batch", []envelope.Message{listen(1000), listen(1000)}, 0, false, 0, 1000},
		{"listen with undecodable params", []envelope.Message{{Method: "subscriptions/listen", Request: true, Params: []byte(`{`)}}, 0, true, 19, 1000},
		{"upload of 600 bytes", []envelope.Message{upload}, 600, true, 19, 400},
		{"upload of 1000 bytes", []envelope.Message{upload}, 1000, true, 19, 0},
		{"upload past the byte burst: the whole bucket", []envelope.Message{upload}, 5000, true, 19, 0},
		{"a response: its bytes only", []envelope.Message{{ID: []byte("1")}}, 10, true, 20, 990},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := testclock.New(time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC))
			l := limit.NewClasses(limit.Options{Now: clk.Now})
			l.Poll.Rate, l.Poll.Burst = 1e-9, 20
			l.Bytes.Rate, l.Bytes.Burst = 1e-9, 1000
			ok, _ := charge(l, "k", auth.Overrides{}, c.msgs, c.bytes, toolClass)
			if ok != c.wantOK {
				t.Fatalf("charge = %v, want %v", ok, c.wantOK)
			}
			if got := left(l.Poll, clk.Now()); got != c.wantPolls {
				t.Errorf("poll tokens left %v, want %v", got, c.wantPolls)
			}
			if got := left(l.Bytes, clk.Now()); got != c.wantBytes {
				t.Errorf("bytes left %v, want %v", got, c.wantBytes)
			}
		})
	}
}

// left is the whole tokens left in key "k"'s bucket of c: taken one by
// one until refused (the clock does not move).
func left(c limit.Class, now time.Time) float64 {
	n := 0
	for {
		if ok, _ := c.AllowNAt(now, "k", c.Rate, c.Burst, 1); !ok {
			return float64(n)
		}
		n++
	}
}
