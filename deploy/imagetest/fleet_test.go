package imagetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fleet is deploy/compose.yaml brought up by scripts/fleet.sh: the
// project's containers, reached through HAProxy's published port.
type fleet struct {
	t                 *testing.T
	project, lb, s3   string
	token, state      string
	replicas          []string // service names
	haproxy, localVol string
}

func needFleet(t *testing.T) *fleet {
	t.Helper()
	state := os.Getenv("DARKROOM_FLEET")
	if state == "" {
		t.Skip("DARKROOM_FLEET is not set: make fleet-test brings the compose fleet up and runs these checks")
	}
	_, token, _ := strings.Cut(os.Getenv("DARKROOM_API_KEYS"), "=")
	f := &fleet{t: t, project: os.Getenv("DARKROOM_FLEET_PROJECT"), lb: os.Getenv("DARKROOM_PUBLIC_URL"),
		s3: os.Getenv("DARKROOM_S3_PUBLIC_ENDPOINT"), token: token, state: state,
		replicas: []string{"darkroom1", "darkroom2", "darkroom3"}}
	f.haproxy = f.container("haproxy")
	f.localVol = f.project + "_local-provider"
	return f
}

// container is the name of a service's container (podman-compose and
// docker compose both label them).
func (f *fleet) container(service string) string {
	f.t.Helper()
	out := mustEng(f.t, "ps", "-a", "--filter", "label=com.docker.compose.project="+f.project,
		"--filter", "label=com.docker.compose.service="+service, "--format", "{{.Names}}")
	names := strings.Fields(out)
	if len(names) != 1 {
		f.t.Fatalf("service %s: containers %q", service, names)
	}
	return names[0]
}

// waitReady waits until every replica answers /readyz 200 on its own
// address and HAProxy has sent a request to each.
func (f *fleet) waitReady() {
	f.t.Helper()
	t0 := time.Now()
	eventually(f.t, 3*time.Minute, func() bool {
		for _, r := range f.replicas {
			ip, err := eng("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", f.container(r))
			if err != nil || ip == "" || status("http://"+ip+":8080/readyz") != 200 {
				return false
			}
		}
		for range 3 {
			status(f.lb + "/readyz")
		}
		served := f.served()
		for _, r := range f.replicas {
			if served[r] == 0 {
				return false
			}
		}
		return true
	}, "every replica ready and in HAProxy's rotation")
	f.t.Logf("fleet ready in %v", time.Since(t0).Round(100*time.Millisecond))
}

var servedRe = regexp.MustCompile(` darkroom/(darkroom\d) `)

// served counts the requests HAProxy's log says each replica answered.
func (f *fleet) served() map[string]int {
	out := map[string]int{}
	for _, m := range servedRe.FindAllStringSubmatch(logsOf(f.haproxy), -1) {
		out[m[1]]++
	}
	return out
}

// jobs counts the local provider's jobs in the shared volume.
func (f *fleet) jobs() int {
	f.t.Helper()
	mp := mustEng(f.t, "volume", "inspect", "--format", "{{.Mountpoint}}", f.localVol)
	m, err := filepath.Glob(filepath.Join(mp, "local-provider", "jobs", "*.json"))
	if err != nil {
		f.t.Fatal(err)
	}
	return len(m)
}

func (f *fleet) script(args ...string) {
	f.t.Helper()
	script, _ := filepath.Abs("../../scripts/fleet.sh")
	cmd := exec.Command(script, args...)
	cmd.Env = append(os.Environ(), "DARKROOM_FLEET_STATE="+f.state)
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("fleet.sh %v: %v\n%s", args, err, out)
	}
}

var rpcSeq atomic.Int64

// rpcClient speaks the 2026-07-28 wire with the Tasks extension.
type rpcClient struct {
	t          *testing.T
	url, token string
}

type rpcReply struct {
	Status int
	Result map[string]any
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
}

func (c *rpcClient) call(method string, params map[string]any) rpcReply {
	c.t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{
			"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rpcSeq.Add(1), "method": method, "params": params})
	req, _ := http.NewRequest("POST", c.url+"/mcp", bytes.NewReader(body))
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
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
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
	out := rpcReply{Status: resp.StatusCode}
	var env struct {
		Result map[string]any `json:"result"`
		Error  json.RawMessage
	}
	_ = json.Unmarshal(raw, &env)
	out.Result = env.Result
	if len(env.Error) > 0 {
		_ = json.Unmarshal(env.Error, &out.Error)
	}
	return out
}

// waitTask polls tasks/get, honouring pollIntervalMs, until terminal.
func (c *rpcClient) waitTask(id string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
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
		time.Sleep(time.Duration(min(max(ms, 50), 500)) * time.Millisecond)
	}
	c.t.Fatal("task did not finish")
	return nil
}

// TestFleetCompose: deploy/compose.yaml's three replicas behind HAProxy
// (round-robin, no stickiness) on one PostgreSQL, one S3 bucket and one
// local-provider volume, the checks TestFleetBehindHAProxy makes on
// processes, here on containers: a Tasks client polling across
// replicas, a legacy generate + wait_generation, a cancel, an idempotency
// key sent three times; the replica stepping a video killed (SIGKILL)
// mid-video: exactly one provider job and the video completes; every
// replica took requests; then compose down and up, and every id still
// resolves and the task's link still downloads.
func TestFleetCompose(t *testing.T) {
	f := needFleet(t)
	t0 := time.Now()
	f.waitReady()
	var ids []string

	rc := &rpcClient{t: t, url: f.lb, token: f.token}
	r := rc.call("tools/call", map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": "a fleet task"}})
	taskID, _ := r.Result["taskId"].(string)
	if r.Result["resultType"] != "task" || taskID == "" {
		t.Fatalf("task generate: %d %+v %v", r.Status, r.Error, r.Result)
	}
	done := rc.waitTask(taskID)
	if done["status"] != "completed" {
		t.Fatalf("task through the LB: %v", done)
	}
	sc := done["result"].(map[string]any)["structuredContent"].(map[string]any)
	ids = append(ids, sc["generationId"].(string))
	out0 := sc["outputs"].([]any)[0].(map[string]any)
	taskURL, taskSHA := out0["url"].(string), fmt.Sprint(out0["sha256"])
	download(t, f.s3, taskURL, taskSHA)
	t.Logf("task %s completed; its link downloads from %s", taskID, f.s3)

	legacy := connect(t, f.lb, f.token, "2025-11-25")
	var g genView
	call(t, legacy, "generate", map[string]any{"modelId": "local-sketch", "prompt": "a legacy one"}, &g)
	if w := waitDone(t, legacy, g.GenerationID); w.Status != "completed" {
		t.Fatalf("legacy wait_generation: %+v", w)
	}
	ids = append(ids, g.GenerationID)

	cs := connect(t, f.lb, f.token, "2026-07-28")
	var v, c genView
	call(t, cs, "generate", map[string]any{"modelId": "local-motion", "prompt": "cancel me"}, &v)
	call(t, cs, "cancel_generation", map[string]any{"generationId": v.GenerationID}, &c)
	if c.Status != "cancelled" {
		if c = waitDone(t, cs, v.GenerationID); c.Status != "cancelled" {
			t.Fatalf("cancel through the LB ended %s (%s)", c.Status, c.StatusMessage)
		}
	}
	ids = append(ids, v.GenerationID)

	args := map[string]any{"modelId": "local-sketch", "prompt": "once", "idempotencyKey": "fleet-k1"}
	var a, b, b2 genView
	call(t, cs, "generate", args, &a)
	call(t, cs, "generate", args, &b)
	call(t, cs, "generate", args, &b2)
	if a.GenerationID == "" || a.GenerationID != b.GenerationID || b.GenerationID != b2.GenerationID {
		t.Fatalf("idempotent generate through the LB: %q %q %q", a.GenerationID, b.GenerationID, b2.GenerationID)
	}
	ids = append(ids, a.GenerationID)
	if w := waitDone(t, cs, a.GenerationID); w.Status != "completed" {
		t.Fatalf("idempotent generate ended %s (%s)", w.Status, w.StatusMessage)
	}
	t.Logf("legacy, cancel and idempotency key x3 through the LB: ok")

	// Kill the replica that submitted the video, while it is at the provider.
	before := f.jobs()
	var k genView
	call(t, cs, "generate", map[string]any{"modelId": "local-motion", "prompt": "survive a kill"}, &k)
	ids = append(ids, k.GenerationID)
	var stepping string
	eventually(t, 30*time.Second, func() bool {
		if f.jobs() == before {
			return false
		}
		for _, r := range f.replicas {
			for _, l := range strings.Split(logsOf(f.container(r)), "\n") {
				if strings.Contains(l, `"msg":"generation submitted"`) && strings.Contains(l, k.GenerationID) {
					stepping = r
					return true
				}
			}
		}
		return false
	}, "the video's provider job and the replica that submitted it")
	mustEng(t, "kill", f.container(stepping))
	tk := time.Now()
	t.Logf("killed %s (it submitted %s)", stepping, k.GenerationID)
	var kw genView
	for kw.Status != "completed" {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait_generation",
			Arguments: map[string]any{"generationId": k.GenerationID, "timeoutSeconds": 30}})
		if err != nil {
			if time.Since(tk) > 2*time.Minute {
				t.Fatalf("after the kill: %v", err)
			}
			t.Logf("a wait failed at the kill (%v): waiting again on a new session", err)
			cs = connect(t, f.lb, f.token, "2026-07-28")
			continue
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &kw); err != nil {
			t.Fatal(err)
		}
		if kw.Status == "failed" || kw.Status == "cancelled" || time.Since(tk) > 2*time.Minute {
			t.Fatalf("after the kill: %s (%s)", kw.Status, kw.StatusMessage)
		}
	}
	t.Logf("video completed %v after the kill", time.Since(tk).Round(100*time.Millisecond))
	// The task's image, the legacy image, the idempotent image, the video,
	// and the cancelled video's unless the cancel came before its submit.
	if jobs := f.jobs(); jobs < 4 || jobs > 5 || jobs-before != 1 {
		t.Fatalf("provider jobs = %d (the video's %d), want 4 or 5 (exactly 1)", jobs, jobs-before)
	}
	resolve := func(when string) {
		t.Helper()
		cs := connect(t, f.lb, f.token, "2026-07-28")
		for _, id := range ids {
			var got genView
			call(t, cs, "get_generation", map[string]any{"generationId": id}, &got)
			if got.GenerationID != id || (got.Status != "completed" && got.Status != "cancelled") {
				t.Fatalf("%s: get_generation %s through the LB: %+v", when, id, got)
			}
		}
		if got := rc.call("tasks/get", map[string]any{"taskId": taskID}); got.Result["status"] != "completed" {
			t.Fatalf("%s: tasks/get %s: %+v %v", when, taskID, got.Error, got.Result)
		}
	}
	resolve("after the kill")
	served := f.served()
	for _, r := range f.replicas {
		if served[r] == 0 {
			t.Fatalf("replica %s took no requests: %v (not round-robin?)", r, served)
		}
	}
	t.Logf("requests per replica %v; %v so far", served, time.Since(t0).Round(100*time.Millisecond))

	td := time.Now()
	f.script("down")
	f.script("up")
	f.haproxy = f.container("haproxy")
	f.waitReady()
	resolve("after down and up")
	download(t, f.s3, taskURL, taskSHA)
	t.Logf("down and up in %v: %d ids and the task resolve, its link downloads; %v in all",
		time.Since(td).Round(100*time.Millisecond), len(ids), time.Since(t0).Round(100*time.Millisecond))
}
