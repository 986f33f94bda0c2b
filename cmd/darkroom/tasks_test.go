package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/server/auth"
)

var rpcSeq atomic.Int64

// rpcClient speaks the 2026-07-28 wire directly, so tests see exactly
// what crosses it.
type rpcClient struct {
	t     *testing.T
	url   string
	token string
	caps  map[string]any
}

func withTasks() map[string]any {
	return map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}, "elicitation": map[string]any{}}
}

type rpcReply struct {
	Status int
	Header http.Header
	Result map[string]any
	Error  *struct {
		Code    int64          `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	}
}

func (c *rpcClient) call(method string, params map[string]any, headers ...string) rpcReply {
	c.t.Helper()
	out, err := rpcDo(http.DefaultClient, c.url, c.token, c.caps, method, params, headers...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// rpcRequest is a 2026-07-28 JSON-RPC request to base/mcp, with the
// routing headers (Mcp-Method, Mcp-Name) a client of that era sends.
func rpcRequest(base, token string, caps map[string]any, method string, params map[string]any, headers ...string) *http.Request {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	id := rpcSeq.Add(1)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, _ := http.NewRequest("POST", base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// rpcDo is one 2026-07-28 request to base/mcp, the reply's last message
// decoded; a transport error is returned, not fatal (for load goroutines).
func rpcDo(hc *http.Client, base, token string, caps map[string]any, method string, params map[string]any, headers ...string) (rpcReply, error) {
	resp, err := hc.Do(rpcRequest(base, token, caps, method, params, headers...))
	if err != nil {
		return rpcReply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return rpcReply{Status: resp.StatusCode}, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The last data line carries the response.
		var last string
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				last = d
			}
		}
		raw = []byte(last)
	}
	out := rpcReply{Status: resp.StatusCode, Header: resp.Header}
	var env struct {
		Result map[string]any `json:"result"`
		Error  json.RawMessage
	}
	_ = json.Unmarshal(raw, &env)
	out.Result = env.Result
	if len(env.Error) > 0 {
		_ = json.Unmarshal(env.Error, &out.Error)
	}
	return out, nil
}

func (c *rpcClient) tool(name string, args map[string]any) rpcReply {
	c.t.Helper()
	return c.call("tools/call", map[string]any{"name": name, "arguments": args})
}

// waitTask polls tasks/get, honouring pollIntervalMs, until terminal.
func (c *rpcClient) waitTask(id string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r := c.call("tasks/get", map[string]any{"taskId": id})
		if r.Error != nil {
			c.t.Fatalf("tasks/get: %+v", r.Error)
		}
		switch r.Result["status"] {
		case "completed", "failed", "cancelled":
			return r.Result
		}
		ms, _ := r.Result["pollIntervalMs"].(float64)
		time.Sleep(time.Duration(min(ms, 200)) * time.Millisecond) // a client honouring pollIntervalMs
	}
	c.t.Fatal("task did not finish")
	return nil
}

func TestTaskLifecycle(t *testing.T) {
	s := startServer(t, 0)
	c := &rpcClient{t: t, url: s.url, caps: withTasks()}

	disc := c.call("server/discover", nil)
	caps := disc.Result["capabilities"].(map[string]any)
	if _, ok := caps["extensions"].(map[string]any)["io.modelcontextprotocol/tasks"]; !ok || caps["tasks"] != nil {
		t.Fatalf("discover capabilities: %v", caps)
	}

	r := c.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "a heron", "seed": 3})
	if r.Result["resultType"] != "task" || r.Result["taskId"] == nil || r.Result["task"] != nil || r.Result["result"] != nil {
		t.Fatalf("CreateTaskResult: %v", r.Result)
	}
	for _, k := range []string{"status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} {
		if r.Result[k] == nil {
			t.Errorf("CreateTaskResult lacks %s", k)
		}
	}
	id := r.Result["taskId"].(string)
	// Durable before the reply: an immediate tasks/get resolves.
	if g := c.call("tasks/get", map[string]any{"taskId": id}); g.Error != nil || g.Result["resultType"] != "complete" {
		t.Fatalf("immediate tasks/get: %+v %v", g.Error, g.Result)
	}
	done := c.waitTask(id)
	res := done["result"].(map[string]any)
	sc := res["structuredContent"].(map[string]any)
	if done["status"] != "completed" || res["isError"] == true || sc["status"] != "completed" || sc["timedOut"] != false {
		t.Fatalf("completed task: %v", done)
	}
	// The inlined result matches what generate with wait:true returns.
	plain := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	w := plain.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "a heron", "seed": 3, "wait": true})
	wsc := w.Result["structuredContent"].(map[string]any)
	if w.Result["resultType"] != "complete" || wsc["outputs"].([]any)[0].(map[string]any)["sha256"] != sc["outputs"].([]any)[0].(map[string]any)["sha256"] {
		t.Fatalf("wait:true result differs from the task result")
	}
	// Terminal: cancel is an idempotent empty ack, and nothing changes.
	ack := c.call("tasks/cancel", map[string]any{"taskId": id})
	if ack.Result["resultType"] != "complete" || ack.Result["taskId"] != nil || ack.Result["status"] != nil {
		t.Fatalf("cancel ack: %v", ack.Result)
	}
	if g := c.call("tasks/get", map[string]any{"taskId": id}); g.Result["status"] != "completed" {
		t.Fatalf("terminal task changed: %v", g.Result["status"])
	}
}

func TestTaskProviderFailureIsToolError(t *testing.T) {
	s := startServer(t, 0)
	c := &rpcClient{t: t, url: s.url, caps: withTasks()}
	r := c.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "[fail] please"})
	done := c.waitTask(r.Result["taskId"].(string))
	if done["status"] != "completed" || done["result"].(map[string]any)["isError"] != true || done["error"] != nil {
		t.Fatalf("provider failure: %v", done)
	}
}

func TestTaskCancelWhileRunning(t *testing.T) {
	s := startServer(t, 1)
	c := &rpcClient{t: t, url: s.url, caps: withTasks()}
	r := c.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "slow pan"})
	id := r.Result["taskId"].(string)
	if ack := c.call("tasks/cancel", map[string]any{"taskId": id}); ack.Error != nil {
		t.Fatal(ack.Error)
	}
	if done := c.waitTask(id); done["status"] != "cancelled" {
		t.Fatalf("after cancel: %v", done["status"])
	}
}

func TestTaskGatingAndErrors(t *testing.T) {
	s := startServer(t, 0)
	plain := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	c := &rpcClient{t: t, url: s.url, caps: withTasks()}
	// Without the extension: tasks/* answer -32021, generate answers as the
	// compatibility tool.
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		r := plain.call(m, map[string]any{"taskId": "x", "inputResponses": map[string]any{}})
		if r.Error == nil || r.Error.Code != -32021 || r.Status != 400 {
			t.Errorf("%s without extension: %d %+v", m, r.Status, r.Error)
		}
	}
	g := plain.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "x"})
	if g.Result["resultType"] != "complete" || g.Result["taskId"] != nil {
		t.Fatalf("generate without extension: %v", g.Result)
	}
	// Unknown task: -32602; removed methods: -32601.
	if r := c.call("tasks/get", map[string]any{"taskId": "nope"}); r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("unknown task: %+v", r.Error)
	}
	for _, m := range []string{"tasks/result", "tasks/list"} {
		if r := c.call(m, map[string]any{"taskId": "nope"}); r.Error == nil || r.Error.Code != -32601 {
			t.Errorf("%s: %+v", m, r.Error)
		}
	}
	// Mcp-Name must match the task id.
	r := c.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "x"})
	id := r.Result["taskId"].(string)
	if r := c.call("tasks/get", map[string]any{"taskId": id}, "Mcp-Name", "other"); r.Status != 400 || r.Error == nil || r.Error.Code != -32020 {
		t.Fatalf("Mcp-Name mismatch: %d %+v", r.Status, r.Error)
	}
}

func TestApprovalGate(t *testing.T) {
	s := startServer(t, 0, func(c *config) { five := int64(5); c.ApprovalAbove = &five })
	c := &rpcClient{t: t, url: s.url, caps: withTasks()}
	// local-motion costs 20 credits: held for approval.
	r := c.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "x", "durationSeconds": 2})
	id := r.Result["taskId"].(string)
	g := c.call("tasks/get", map[string]any{"taskId": id})
	reqs, _ := g.Result["inputRequests"].(map[string]any)
	if g.Result["status"] != "input_required" || len(reqs) != 1 {
		t.Fatalf("approval: %v", g.Result)
	}
	var key string
	for k := range reqs {
		key = k
	}
	ack := c.call("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"unknown": map[string]any{"action": "accept"},
		key:       map[string]any{"action": "accept", "content": map[string]any{"confirm": true}},
	}})
	if ack.Error != nil || ack.Result["resultType"] != "complete" || len(ack.Result) != 2 { // resultType + _meta
		t.Fatalf("update ack: %+v %v", ack.Error, ack.Result)
	}
	if done := c.waitTask(id); done["status"] != "completed" {
		t.Fatalf("approved task: %v", done["status"])
	}
	// Declined: cancelled, credits refunded.
	r = c.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "y", "durationSeconds": 2})
	id = r.Result["taskId"].(string)
	g = c.call("tasks/get", map[string]any{"taskId": id})
	for k := range g.Result["inputRequests"].(map[string]any) {
		c.call("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{k: map[string]any{"action": "decline"}}})
	}
	if done := c.waitTask(id); done["status"] != "cancelled" {
		t.Fatalf("declined task: %v", done["status"])
	}
	// Without elicitation, a tasks client gets -32021 naming elicitation.
	noElicit := &rpcClient{t: t, url: s.url, caps: map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	if r := noElicit.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "z"}); r.Error == nil || r.Error.Code != -32021 {
		t.Fatalf("no elicitation: %+v %v", r.Error, r.Result)
	}
	// A plain client confirms with confirmSpend.
	plain := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	if r := plain.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "z"}); r.Result["isError"] != true {
		t.Fatalf("plain client without confirmSpend: %v", r.Result)
	}
	if r := plain.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "z", "confirmSpend": true}); r.Result["isError"] == true {
		t.Fatalf("plain client with confirmSpend: %v", r.Result)
	}
}

func TestListenNotifications(t *testing.T) {
	s := startServer(t, 0.05)
	c := &rpcClient{t: t, url: s.url, caps: withTasks()}
	r := c.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "notify", "durationSeconds": 2})
	id := r.Result["taskId"].(string)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 77, "method": "subscriptions/listen", "params": map[string]any{
		"_meta":         map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": withTasks()},
		"notifications": map[string]any{"taskIds": []string{id, "not-mine"}},
	}})
	req, _ := http.NewRequest("POST", s.url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var msgs []map[string]any
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(d), &m)
		msgs = append(msgs, m)
		if m["result"] != nil {
			break // the server ends the stream once the task is terminal
		}
	}
	if len(msgs) < 3 || msgs[0]["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("listen stream: %v", msgs)
	}
	agreed := msgs[0]["params"].(map[string]any)["notifications"].(map[string]any)["taskIds"].([]any)
	if len(agreed) != 1 || agreed[0] != id {
		t.Fatalf("agreed taskIds = %v, want only %s", agreed, id)
	}
	last := msgs[len(msgs)-2]["params"].(map[string]any)
	if last["status"] != "completed" || last["result"] == nil || fmt.Sprint(last["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"]) != "77" {
		t.Fatalf("final notification: %v", last)
	}
}

func TestForeignIDsLookUnknown(t *testing.T) {
	keys, err := auth.ParseKeyList("alice=secret-alice-1234,bob=secret-bob-5678", "test")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, 1, func(c *config) { c.Auth = auth.Config{Keys: keys} })
	alice := &rpcClient{t: t, url: s.url, token: "secret-alice-1234", caps: withTasks()}
	bob := &rpcClient{t: t, url: s.url, token: "secret-bob-5678", caps: withTasks()}
	bobPlain := &rpcClient{t: t, url: s.url, token: "secret-bob-5678", caps: map[string]any{}}

	task := alice.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "mine"})
	tid := task.Result["taskId"].(string)
	gen := (&rpcClient{t: t, url: s.url, token: "secret-alice-1234", caps: map[string]any{}}).tool("generate", map[string]any{"modelId": "local-motion", "prompt": "mine too"})
	gid := gen.Result["structuredContent"].(map[string]any)["generationId"].(string)
	random := "0123456789abcdef0123456789abcdef"

	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		p := func(id string) map[string]any {
			return map[string]any{"taskId": id, "inputResponses": map[string]any{}}
		}
		foreign, unknown := bob.call(m, p(tid)), bob.call(m, p(random))
		if foreign.Error == nil || unknown.Error == nil || fmt.Sprint(*foreign.Error) != fmt.Sprint(*unknown.Error) || foreign.Status != unknown.Status {
			t.Errorf("%s: foreign %+v vs unknown %+v", m, foreign.Error, unknown.Error)
		}
	}
	for _, tool := range []string{"get_generation", "wait_generation", "download_output", "cancel_generation", "upload_input"} {
		args := func(id string) map[string]any {
			return map[string]any{"generationId": id, "timeoutSeconds": 5, "image": map[string]any{"data": "aGk=", "mimeType": "image/png"}}
		}
		foreign, unknown := bobPlain.tool(tool, args(gid)), bobPlain.tool(tool, args(random))
		ft, _ := json.Marshal(foreign.Result["content"])
		ut, _ := json.Marshal(unknown.Result["content"])
		if strings.ReplaceAll(string(ft), gid, random) != string(ut) {
			t.Errorf("%s: foreign %s vs unknown %s", tool, ft, ut)
		}
	}
	// Bob's list is empty; Alice's records are untouched.
	l := bobPlain.tool("list_generations", nil)
	if n := len(l.Result["structuredContent"].(map[string]any)["generations"].([]any)); n != 0 {
		t.Fatalf("bob sees %d generations", n)
	}
	if g := alice.call("tasks/get", map[string]any{"taskId": tid}); g.Result["status"] != "working" {
		t.Fatalf("alice's task after bob's attempts: %v", g.Result["status"])
	}
}

func TestAuthRequired(t *testing.T) {
	keys, _ := auth.ParseKeyList("alice=secret-alice-1234", "test")
	s := startServer(t, 0, func(c *config) { c.Auth = auth.Config{Keys: keys} })
	for _, tok := range []string{"", "wrong-token"} {
		r := (&rpcClient{t: t, url: s.url, token: tok, caps: withTasks()}).call("tools/list", nil)
		// API keys alone: no metadata to name (its URL would answer 404).
		if r.Status != 401 || strings.Contains(r.Header.Get("WWW-Authenticate"), "resource_metadata=") {
			t.Errorf("token %q: %d %q", tok, r.Status, r.Header.Get("WWW-Authenticate"))
		}
	}
	if r := (&rpcClient{t: t, url: s.url, token: "secret-alice-1234", caps: withTasks()}).call("tools/list", nil); r.Status != 200 {
		t.Fatalf("valid key: %d", r.Status)
	}
}

func TestPollFloodIsLimitedPerCaller(t *testing.T) {
	keys, _ := auth.ParseKeyList("flood=secret-flood-1234,calm=secret-calm-5678", "test")
	s := startServer(t, 0, func(c *config) { c.Auth = auth.Config{Keys: keys} })
	flood := &rpcClient{t: t, url: s.url, token: "secret-flood-1234", caps: withTasks()}
	calm := &rpcClient{t: t, url: s.url, token: "secret-calm-5678", caps: withTasks()}
	ft := flood.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "f"}).Result["taskId"].(string)
	ct := calm.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "c"})
	limited := 0
	for range 40 {
		r := flood.call("tasks/get", map[string]any{"taskId": ft})
		if r.Status == 429 {
			limited++
			if r.Header.Get("Retry-After") == "" || r.Error == nil || r.Error.Data["retryAfterMs"] == nil {
				t.Fatalf("429 without Retry-After or retryAfterMs: %v %+v", r.Header, r.Error)
			}
		}
	}
	if limited == 0 {
		t.Fatal("a 40-poll burst was never limited")
	}
	// The calm caller honours pollIntervalMs and never meets a 429.
	ms := ct.Result["pollIntervalMs"].(float64)
	for range 3 {
		if r := calm.call("tasks/get", map[string]any{"taskId": ct.Result["taskId"].(string)}); r.Status != 200 {
			t.Fatalf("calm caller got %d", r.Status)
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

func TestBudgetAndRefund(t *testing.T) {
	s := startServer(t, 1, func(c *config) { b := int64(25); c.DailyBudget = &b })
	c := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	g := c.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "one", "durationSeconds": 2}) // 20 credits
	over := c.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "two", "durationSeconds": 2})
	if over.Result["isError"] != true || !strings.Contains(fmt.Sprint(over.Result["content"]), "balance") {
		t.Fatalf("over budget: %v", over.Result)
	}
	cr := c.tool("get_credits", nil).Result["structuredContent"].(map[string]any)
	if cr["spent"].(float64) != 20 || cr["balance"].(float64) != 5 || cr["limit"].(float64) != 25 {
		t.Fatalf("credits: %v", cr)
	}
	// Cancelled before delivery: the credits come back.
	id := g.Result["structuredContent"].(map[string]any)["generationId"].(string)
	c.tool("cancel_generation", map[string]any{"generationId": id})
	if w := c.tool("wait_generation", map[string]any{"generationId": id, "timeoutSeconds": 30}); w.Result["structuredContent"].(map[string]any)["status"] != "cancelled" {
		t.Fatalf("cancel: %v", w.Result)
	}
	cr = c.tool("get_credits", nil).Result["structuredContent"].(map[string]any)
	if cr["spent"].(float64) != 0 {
		t.Fatalf("after cancel, spent = %v", cr["spent"])
	}
}

// TestApprovalThenUpload: a generation that waits for both its spend
// approval and its input image leaves input_required once approved, says
// what it still needs, and starts only when both are in.
func TestApprovalThenUpload(t *testing.T) {
	s := startServer(t, 0, func(c *config) { five := int64(5); c.ApprovalAbove = &five })
	c := &rpcClient{t: t, url: s.url, caps: withTasks()}
	id := c.tool("generate", map[string]any{"modelId": "local-animate", "prompt": "ripples", "durationSeconds": 2}).Result["taskId"].(string)
	g := c.call("tasks/get", map[string]any{"taskId": id})
	for k := range g.Result["inputRequests"].(map[string]any) {
		c.call("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{k: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}})
	}
	g = c.call("tasks/get", map[string]any{"taskId": id})
	msg, _ := g.Result["statusMessage"].(string)
	if g.Result["status"] != "working" || !strings.Contains(msg, "upload_input") {
		t.Fatalf("approved, image missing: %v", g.Result)
	}
	m := regexp.MustCompile(`generationId (\S+)`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("the status message names no generationId: %q", msg)
	}
	genID := m[1]
	var buf bytes.Buffer
	_ = png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 32, 18)))
	plain := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	up := plain.tool("upload_input", map[string]any{"generationId": genID, "image": map[string]any{"data": base64.StdEncoding.EncodeToString(buf.Bytes()), "mimeType": "image/png"}})
	if up.Result["isError"] == true {
		t.Fatalf("upload: %v", up.Result)
	}
	if done := c.waitTask(id); done["status"] != "completed" {
		t.Fatalf("after approval and upload: %v", done["status"])
	}
}

// TestApprovalByMRTR: a client without the Tasks extension that declared
// elicitation confirms the spend through an InputRequiredResult whose
// requestState is bound to it and to the arguments.
func TestApprovalByMRTR(t *testing.T) {
	s := startServer(t, 0, func(c *config) { five := int64(5); c.ApprovalAbove = &five })
	c := &rpcClient{t: t, url: s.url, caps: map[string]any{"elicitation": map[string]any{}}}
	args := map[string]any{"modelId": "local-motion", "prompt": "mrtr", "durationSeconds": 2}
	r1 := c.tool("generate", args)
	reqs, _ := r1.Result["inputRequests"].(map[string]any)
	state, _ := r1.Result["requestState"].(string)
	if r1.Result["resultType"] != "input_required" || len(reqs) != 1 || state == "" || r1.Result["taskId"] != nil {
		t.Fatalf("round 1: %v", r1.Result)
	}
	var key string
	for k := range reqs {
		key = k
	}
	answer := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
	// A tampered state is not trusted: the question is asked again.
	tampered := c.call("tools/call", map[string]any{"name": "generate", "arguments": args, "inputResponses": answer, "requestState": state + "x"})
	if tampered.Result["resultType"] != "input_required" {
		t.Fatalf("tampered requestState accepted: %v", tampered.Result)
	}
	r2 := c.call("tools/call", map[string]any{"name": "generate", "arguments": args, "inputResponses": answer, "requestState": state})
	sc, _ := r2.Result["structuredContent"].(map[string]any)
	if r2.Result["resultType"] != "complete" || sc["generationId"] == nil || r2.Result["isError"] == true {
		t.Fatalf("round 2: %v", r2.Result)
	}
	// Another caller cannot reuse the state with other arguments.
	other := map[string]any{"modelId": "local-motion", "prompt": "something else", "durationSeconds": 2}
	if r := c.call("tools/call", map[string]any{"name": "generate", "arguments": other, "inputResponses": answer, "requestState": state}); r.Result["resultType"] != "input_required" {
		t.Fatalf("state reused for other arguments: %v", r.Result)
	}
}

// TestLeanGenerateAnswersAsGoSDK: a Tasks client's generate is answered
// by the dispatcher's own tools/call path whatever the outcome (a task, or
// a refusal: the route is final, nothing is handed back to go-sdk); the
// same call made to go through go-sdk (a requestState, which a Tasks
// client's generate ignores, sends it there) gets the same answer.
func TestLeanGenerateAnswersAsGoSDK(t *testing.T) {
	s := startServer(t, 0, func(c *config) {
		five := int64(5)
		c.ApprovalAbove = &five
		c.CreateRate, c.CreateBurst = 1e6, 1_000_000
	})
	noElicit := map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	cases := []struct {
		name string
		caps map[string]any
		args map[string]any
		lean bool // the dispatcher answers (a task, a refusal or a JSON-RPC error)
	}{
		{"task created", withTasks(), map[string]any{"modelId": "local-sketch", "prompt": "a"}, true},
		{"held for approval", withTasks(), map[string]any{"modelId": "local-motion", "prompt": "b"}, true},
		{"approval needs elicitation", noElicit, map[string]any{"modelId": "local-motion", "prompt": "c"}, true},
		{"same idempotency key", withTasks(), map[string]any{"modelId": "local-sketch", "prompt": "d", "idempotencyKey": "k1"}, true},
		{"unknown model", withTasks(), map[string]any{"modelId": "nope", "prompt": "e"}, true},
		{"blank prompt", withTasks(), map[string]any{"modelId": "local-sketch", "prompt": " "}, true},
		{"bad waitSeconds", withTasks(), map[string]any{"modelId": "local-sketch", "prompt": "f", "waitSeconds": 1}, true},
	}
	normal := func(r rpcReply, again bool) string {
		delete(r.Result, "taskId")
		delete(r.Result, "createdAt")
		delete(r.Result, "lastUpdatedAt")
		if again { // the same task, read later: it has moved on
			delete(r.Result, "status")
			delete(r.Result, "statusMessage")
		}
		b, _ := json.Marshal(map[string]any{"result": r.Result, "error": r.Error})
		return string(b)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := &rpcClient{t: t, url: s.url, caps: c.caps}
			lean := cl.call("tools/call", map[string]any{"name": "generate", "arguments": c.args})
			sdk := cl.call("tools/call", map[string]any{"name": "generate", "arguments": c.args, "requestState": "ignored"})
			if got := lean.Header.Get("Content-Type") == "application/json"; got != c.lean {
				t.Errorf("answered by the dispatcher: %v, want %v", got, c.lean)
			}
			if ct := sdk.Header.Get("Content-Type"); sdk.Error == nil && ct != "text/event-stream" {
				t.Errorf("the requestState call was answered with %q, not by go-sdk", ct)
			}
			again := c.args["idempotencyKey"] != nil
			if again && lean.Result["taskId"] != sdk.Result["taskId"] {
				t.Errorf("same key, different tasks: %v and %v", lean.Result["taskId"], sdk.Result["taskId"])
			}
			if l, g := normal(lean, again), normal(sdk, again); l != g {
				t.Errorf("answers differ:\n lean:   %s\n go-sdk: %s", l, g)
			}
		})
	}
}
