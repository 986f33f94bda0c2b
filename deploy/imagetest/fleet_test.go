package imagetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// ip is a service's container address on the compose network (the host
// reaches it there: the replicas' own /readyz, HAProxy's ops port).
func (f *fleet) ip(service string) string {
	ip, err := eng("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", f.container(service))
	if err != nil {
		return ""
	}
	return ip
}

// waitReady waits until the fleet serves through HAProxy: HAProxy's
// stats show every replica UP with its last check passed and its /ready
// (nbsrv) answers 200, and requests sent through it reach every replica
// and are answered by the replica (X-Darkroom-Replica). A replica's own
// /readyz answering 200 is not enough: HAProxy puts back a replica it
// marked DOWN only after `rise` passing checks, 2 × 2 s later, and until
// then answers 503 itself (the cold-machine failure of issue 36: a fleet
// "ready in 4.2s" and then HAProxy's 503 to the first generate). It logs
// how long after the replicas' own readiness HAProxy's came.
func (f *fleet) waitReady() {
	f.t.Helper()
	t0 := time.Now()
	var selfReady time.Duration
	seen := map[string]bool{}
	var last string
	eventually(f.t, 3*time.Minute, func() bool {
		if selfReady == 0 {
			all := true
			for _, r := range f.replicas {
				if ip := f.ip(r); ip == "" || status("http://"+ip+":8080/readyz") != 200 {
					all = false
					break
				}
			}
			if all {
				selfReady = time.Since(t0)
			}
		}
		lb := f.ip("haproxy")
		if lb == "" {
			last = "no HAProxy container address"
			return false
		}
		servers, err := haproxyServers("http://" + lb + ":8404/stats;csv")
		if err != nil {
			last = err.Error()
			return false
		}
		for _, r := range f.replicas {
			if s := servers[r]; s.Status != "UP" || s.Check != "L7OK" {
				last = fmt.Sprintf("HAProxy: %v", servers)
				return false
			}
		}
		if c := status("http://" + lb + ":8404/ready"); c != 200 {
			last = fmt.Sprintf("HAProxy's /ready: %d", c)
			return false
		}
		for range 3 {
			a := get(f.lb + "/readyz")
			if a.Status != 200 || a.Replica == "" {
				last = "through HAProxy: " + a.String()
				return false
			}
			seen[a.Replica] = true
		}
		for _, r := range f.replicas {
			if !seen[r] {
				last = fmt.Sprintf("through HAProxy, answered by %v so far", seen)
				return false
			}
		}
		return true
	}, "every replica UP in HAProxy (stats) and answering through it", func() string { return last })
	f.t.Logf("fleet ready in %v (every replica's own /readyz 200 after %v)",
		time.Since(t0).Round(100*time.Millisecond), selfReady.Round(100*time.Millisecond))
}

// haproxyServer is one server's line of HAProxy's stats.
type haproxyServer struct{ Status, Check string }

func (s haproxyServer) String() string { return s.Status + "/" + s.Check }

// haproxyServers reads the backend darkroom's servers from HAProxy's
// stats CSV: status (UP, DOWN, "UP 1/2" going down, "DOWN 1/2" coming
// up, MAINT) and check_status of the last check (L7OK passed; INI none
// yet, so an UP that is only HAProxy's assumption at its start).
func haproxyServers(url string) (map[string]haproxyServer, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	rows, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, fmt.Errorf("HAProxy stats: %v", err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[strings.TrimPrefix(h, "# ")] = i
	}
	px, sv, st, ck := col["pxname"], col["svname"], col["status"], col["check_status"]
	if st == 0 || ck == 0 {
		return nil, fmt.Errorf("HAProxy stats without status or check_status: %v", rows[0])
	}
	out := map[string]haproxyServer{}
	for _, r := range rows[1:] {
		if len(r) > ck && r[px] == "darkroom" && r[sv] != "BACKEND" {
			out[r[sv]] = haproxyServer{Status: r[st], Check: r[ck]}
		}
	}
	return out, nil
}

// answer is who answered a request through HAProxy, and how.
type answer struct {
	Status  int
	Replica string // X-Darkroom-Replica: a replica wrote it; empty: HAProxy itself
	Body    string // its start, when it is not JSON-RPC
}

func (a answer) String() string {
	who := "HAProxy itself (no X-Darkroom-Replica)"
	if a.Replica != "" {
		who = "replica " + a.Replica
	}
	if a.Status == 0 {
		who = "nobody"
	}
	s := fmt.Sprintf("%d from %s", a.Status, who)
	if a.Body != "" {
		s += ": " + strconv.Quote(a.Body)
	}
	return s
}

func answerOf(resp *http.Response, raw []byte) answer {
	a := answer{Status: resp.StatusCode, Replica: resp.Header.Get("X-Darkroom-Replica")}
	if resp.StatusCode != 200 || !json.Valid(raw) {
		a.Body = string(raw[:min(len(raw), 160)])
	}
	return a
}

func get(url string) answer {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return answer{Body: err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return answerOf(resp, raw)
}

// servedRe is a request line of HAProxy's httplog ("mcp darkroom/darkroom2
// 0/0/1/3/4 200 ..."); its other lines ("Server darkroom/darkroom2 is
// DOWN ...") name the servers too, and are no request served.
var servedRe = regexp.MustCompile(` darkroom/(darkroom\d) -?\d+/-?\d+/`)

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
	By     answer // who answered (a replica or HAProxy itself)
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
	out := rpcReply{Status: resp.StatusCode, By: answerOf(resp, raw)}
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
		t.Fatalf("task generate: %v; %+v %v", r.By, r.Error, r.Result)
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

// TestFleetReadiness: every replica stopped at once and started again,
// which is a cold machine's start in small (issue 36: HAProxy listening
// before any replica can serve). While none is UP, HAProxy answers 503
// itself and the test says so; once waitReady says the fleet is ready,
// the first generate is answered by a replica. With the readiness that
// trusted each replica's own /readyz (and counted HAProxy's "Server
// darkroom/darkroom1 is DOWN" lines as requests served), that generate
// got HAProxy's 503.
func TestFleetReadiness(t *testing.T) {
	f := needFleet(t)
	f.waitReady()
	var names []string
	for _, r := range f.replicas {
		names = append(names, f.container(r))
	}
	mustEng(t, append([]string{"stop", "-t", "10"}, names...)...)
	stats := "http://" + f.ip("haproxy") + ":8404"
	var last string
	eventually(t, time.Minute, func() bool {
		servers, err := haproxyServers(stats + "/stats;csv")
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprint(servers)
		for _, r := range f.replicas {
			if servers[r].Status != "DOWN" {
				return false
			}
		}
		return true
	}, "HAProxy to mark every stopped replica DOWN", func() string { return last })
	if c := status(stats + "/ready"); c != 503 {
		t.Fatalf("HAProxy's /ready with every replica DOWN: %d, want 503", c)
	}
	if a := get(f.lb + "/readyz"); a.Status != 503 || a.Replica != "" {
		t.Fatalf("with every replica DOWN, through HAProxy: %v; want HAProxy's own 503", a)
	} else {
		t.Logf("every replica DOWN: %v", a)
	}

	mustEng(t, append([]string{"start"}, names...)...)
	f.waitReady()
	rc := &rpcClient{t: t, url: f.lb, token: f.token}
	r := rc.call("tools/call", map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": "first after the restart"}})
	taskID, _ := r.Result["taskId"].(string)
	if r.Status != 200 || r.By.Replica == "" || taskID == "" {
		t.Fatalf("the first generate once the fleet was ready again: %v; %+v %v", r.By, r.Error, r.Result)
	}
	if done := rc.waitTask(taskID); done["status"] != "completed" {
		t.Fatalf("task after the restart: %v", done)
	}
	t.Logf("the first generate after the restart: %v; its task completed", r.By)
}
