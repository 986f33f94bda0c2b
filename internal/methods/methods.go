// Package methods is the one registry of the JSON-RPC methods darkroom's
// MCP endpoint knows: every method darkroom (the tasks dispatcher) or
// go-sdk v1.8.0 (its serverMethodInfos) answers, and the two Tasks
// methods answered -32601 (tasks/list, tasks/result). Each row says what
// every layer decides about the method: the door (which params field
// Mcp-Name must equal), the charge (its rate class), the metric labels
// (a listed method is its own label), the capability it needs declared,
// and which engine serves it. A method not listed costs a poll, is
// labelled "other" and is go-sdk's to refuse.
package methods

// Rate classes: the per-caller bucket a message draws from.
const (
	// ClassPoll is every call that spends nothing (shares the bucket with
	// tasks/get).
	ClassPoll = "poll"
	// ClassCreate starts a generation (spends credits).
	ClassCreate = "create"
	// ClassTool is tools/call's: the called tool's class (its row in the
	// tool table), create for a tool that names none.
	ClassTool = "tool"
	// ClassListen is subscriptions/listen's: poll tokens by its number of
	// task ids.
	ClassListen = "listen"
)

// The engines that serve a method.
const (
	// SDK is go-sdk's server.
	SDK = "go-sdk"
	// Tasks is the tasks dispatcher (tasks/get, tasks/update,
	// tasks/cancel; subscriptions/listen when it names taskIds).
	Tasks = "tasks"
)

// Method is one row of the registry.
type Method struct {
	Name string
	// Class is the rate class a message of the method draws from.
	Class string
	// Named is the params field a 2026-07-28 request's Mcp-Name header
	// must equal ("name", "uri", "taskId"), "" for a method without one.
	Named string
	// Capability is the server capability the method belongs to
	// ("prompts", "resources", "completion"), answered -32601 when the
	// server does not declare it; "" for one that needs none here.
	Capability string
	// Engine serves the method (SDK, Tasks).
	Engine string
	// Unserved is a method answered -32601 though it is listed (its label
	// is its own).
	Unserved bool
}

// All is every method, in one table.
var All = []Method{
	{Name: "initialize", Class: ClassPoll, Engine: SDK},
	{Name: "ping", Class: ClassPoll, Engine: SDK},
	{Name: "server/discover", Class: ClassPoll, Engine: SDK},
	{Name: "tools/list", Class: ClassPoll, Engine: SDK},
	{Name: "tools/call", Class: ClassTool, Named: "name", Engine: SDK},
	{Name: "resources/list", Class: ClassPoll, Capability: "resources", Engine: SDK},
	{Name: "resources/templates/list", Class: ClassPoll, Capability: "resources", Engine: SDK},
	{Name: "resources/read", Class: ClassPoll, Named: "uri", Capability: "resources", Engine: SDK}, // reads a blob, as download_output links one
	{Name: "resources/subscribe", Class: ClassPoll, Capability: "resources", Engine: SDK},
	{Name: "resources/unsubscribe", Class: ClassPoll, Capability: "resources", Engine: SDK},
	{Name: "prompts/list", Class: ClassPoll, Capability: "prompts", Engine: SDK},
	{Name: "prompts/get", Class: ClassPoll, Named: "name", Capability: "prompts", Engine: SDK},
	{Name: "completion/complete", Class: ClassPoll, Capability: "completion", Engine: SDK},
	{Name: "logging/setLevel", Class: ClassPoll, Engine: SDK},
	{Name: "subscriptions/listen", Class: ClassListen, Engine: Tasks},
	{Name: "tasks/get", Class: ClassPoll, Named: "taskId", Engine: Tasks},
	{Name: "tasks/update", Class: ClassPoll, Named: "taskId", Engine: Tasks},
	{Name: "tasks/cancel", Class: ClassPoll, Named: "taskId", Engine: Tasks},
	{Name: "tasks/list", Class: ClassPoll, Engine: SDK, Unserved: true},
	{Name: "tasks/result", Class: ClassPoll, Engine: SDK, Unserved: true},
	{Name: "notifications/initialized", Class: ClassPoll, Engine: SDK},
	{Name: "notifications/cancelled", Class: ClassPoll, Engine: SDK},
	{Name: "notifications/progress", Class: ClassPoll, Engine: SDK},
	{Name: "notifications/roots/list_changed", Class: ClassPoll, Engine: SDK},
}

// Unlisted is the row of a method not in All: a poll, go-sdk's to refuse.
var Unlisted = Method{Class: ClassPoll, Engine: SDK, Unserved: true}

var byName = func() map[string]*Method {
	m := make(map[string]*Method, len(All))
	for i := range All {
		m[All[i].Name] = &All[i]
	}
	return m
}()

// Lookup returns name's row, and false (with Unlisted) for a method not
// in All.
func Lookup(name string) (*Method, bool) {
	if m, ok := byName[name]; ok {
		return m, true
	}
	return &Unlisted, false
}

// Task reports tasks/get, tasks/update and tasks/cancel: the methods the
// dispatcher serves whatever their params.
func (m *Method) Task() bool { return m.Engine == Tasks && m.Named == "taskId" }

// CapabilityOf is the capability method belongs to: its row's, or for a
// method not listed, the one whose methods share its prefix
// ("prompts/other" is a prompts method, refused as one).
func CapabilityOf(method string) string {
	if m, ok := byName[method]; ok {
		return m.Capability
	}
	for i := range All {
		if c := All[i].Capability; c != "" && len(method) > len(c) && method[:len(c)] == c && method[len(c)] == '/' {
			return c
		}
	}
	return ""
}
