package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
	"github.com/darkroom-mcp/darkroom/server/auth"
)

// postModern posts one 2026-07-28 request with the Tasks extension (as
// token, if any) and returns the status, the request id and every
// message of the answer.
func postModern(t *testing.T, url, token, method string, params map[string]any) (int, int64, []string) {
	t.Helper()
	params["_meta"] = modernMeta(withTasks())
	id := rpcSeq.Add(1) + 1000000 // no other number in an answer looks like it
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, _ := http.NewRequest("POST", url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	for _, k := range []string{"taskId", "name"} {
		if n, ok := params[k].(string); ok {
			req.Header.Set("Mcp-Name", n)
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msgs []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			line = d
		} else if !strings.HasPrefix(line, "{") {
			continue
		}
		msgs = append(msgs, line)
	}
	return resp.StatusCode, id, msgs
}

// rawExchange is postModern's answer as one string, the request's id
// replaced by "ID" (a listen's subscription id is its request id).
func rawExchange(t *testing.T, url, token, method string, params map[string]any) (int, string) {
	t.Helper()
	status, id, msgs := postModern(t, url, token, method, params)
	return status, strings.ReplaceAll(strings.Join(msgs, "\n"), fmt.Sprint(id), "ID")
}

// modernPeer is a wirePeer over HTTP that names tasks in Mcp-Name.
type modernPeer struct {
	t   *testing.T
	url string
}

func (p modernPeer) exchange(method string, params map[string]any) []map[string]any {
	p.t.Helper()
	_, _, lines := postModern(p.t, p.url, "", method, params)
	var msgs []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			p.t.Fatalf("%s: %q", method, l)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// TestTerminalCancelChangesNothing: tasks/cancel on a terminal task is
// the plain ack and leaves the task as it was; cancel_generation on a
// terminal generation leaves its status and the credits spent; over HTTP
// (the dispatcher's path) and stdio (a real child process).
func TestTerminalCancelChangesNothing(t *testing.T) {
	s := startServer(t, 0.05, func(c *config) { c.PollRate = 1000 }) // polls here are not paced
	plain := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	type peer struct {
		wire wirePeer                                              // with the Tasks extension
		tool func(name string, args map[string]any) map[string]any // without: structuredContent
	}
	peers := map[string]func() peer{
		"http": func() peer {
			return peer{modernPeer{t, s.url}, func(name string, args map[string]any) map[string]any {
				sc, _ := plain.tool(name, args).Result["structuredContent"].(map[string]any)
				return sc
			}}
		},
		"stdio": func() peer {
			cs := stdioClient(t, nil, t.TempDir())
			return peer{startStdio(t, "2026-07-28", "DARKROOM_POLL_RATE=1000"), func(name string, args map[string]any) map[string]any {
				var sc map[string]any
				call(t, cs, name, args, &sc)
				return sc
			}}
		},
	}
	last := func(msgs []map[string]any) map[string]any { return msgs[len(msgs)-1] }
	result := func(msgs []map[string]any) map[string]any {
		r, _ := last(msgs)["result"].(map[string]any)
		return r
	}
	for name, mk := range peers {
		t.Run(name, func(t *testing.T) {
			pp := mk()
			p, tool := pp.wire, pp.tool
			generate := func(prompt string) map[string]any {
				return result(p.exchange("tools/call", map[string]any{"name": "generate",
					"arguments": map[string]any{"modelId": "local-motion", "prompt": prompt, "durationSeconds": 2}}))
			}
			getTask := func(id string) map[string]any {
				return result(p.exchange("tasks/get", map[string]any{"taskId": id}))
			}
			settle := func(id string) map[string]any {
				for range 600 {
					if r := getTask(id); r["status"] != "working" {
						return r
					}
					time.Sleep(50 * time.Millisecond) // polling, as a client does
				}
				t.Fatal("task did not end")
				return nil
			}
			// One task completes, one is cancelled while it works.
			done := generate("completes")["taskId"].(string)
			gone := generate("cancelled")["taskId"].(string)
			if r := result(p.exchange("tasks/cancel", map[string]any{"taskId": gone})); r["resultType"] != "complete" {
				t.Fatalf("first cancel: %v", r)
			}
			for _, id := range []string{done, gone} {
				before := settle(id)
				msgs := p.exchange("tasks/cancel", map[string]any{"taskId": id})
				r := result(msgs)
				delete(r, "_meta") // serverInfo, on every result
				if len(r) != 1 || r["resultType"] != "complete" {
					t.Fatalf("cancel of a %s task: %v, want the bare ack", before["status"], last(msgs))
				}
				after := getTask(id)
				for _, k := range []string{"status", "lastUpdatedAt", "statusMessage", "error", "ttlMs"} {
					if fmt.Sprint(before[k]) != fmt.Sprint(after[k]) {
						t.Errorf("%s task: %s %v became %v", before["status"], k, before[k], after[k])
					}
				}
			}

			// cancel_generation on a terminal generation (the tool, without Tasks).
			for _, cancel := range []bool{false, true} {
				g := tool("generate", map[string]any{"modelId": "local-motion", "prompt": "a generation", "durationSeconds": 2})
				id := g["generationId"].(string)
				if cancel { // it may complete first: either end is terminal
					tool("cancel_generation", map[string]any{"generationId": id})
				}
				w := tool("wait_generation", map[string]any{"generationId": id, "timeoutSeconds": 30})
				end := w["status"]
				if end != "completed" && end != "cancelled" {
					t.Fatalf("generation ended %v", w)
				}
				spent := tool("get_credits", map[string]any{})["spent"]
				c := tool("cancel_generation", map[string]any{"generationId": id})
				if c["status"] != end || c["cancelRequested"] == true || c["updatedAt"] != w["updatedAt"] {
					t.Errorf("cancel of a %s generation: %v", end, c)
				}
				if after := tool("get_credits", map[string]any{})["spent"]; after != spent {
					t.Errorf("cancel of a %s generation: spent %v became %v", end, spent, after)
				}
				if g := tool("get_generation", map[string]any{"generationId": id}); g["status"] != end || g["updatedAt"] != w["updatedAt"] {
					t.Errorf("%s generation after the cancel: %v", end, g)
				}
			}
		})
	}
}

// TestExpiredTaskIsUnknown: past its TTL a task answers, to its owner
// and to anyone else, byte for byte as an id never issued, on tasks/get,
// tasks/update, tasks/cancel and subscriptions/listen.
func TestExpiredTaskIsUnknown(t *testing.T) {
	keys, err := auth.ParseKeyList("alice=secret-alice-1234,bob=secret-bob-5678", "test")
	if err != nil {
		t.Fatal(err)
	}
	clock := testclock.New(time.Now())
	s := startServer(t, 0.05, func(c *config) {
		c.Auth = auth.Config{Keys: keys}
		c.tasksNow = clock.Now
		c.PollRate = 1000
	})
	alice := &rpcClient{t: t, url: s.url, token: "secret-alice-1234", caps: withTasks()}
	live := alice.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "short-lived"}).Result["taskId"].(string)
	ended := alice.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "ended"}).Result["taskId"].(string)
	alice.waitTask(ended)
	ttl := time.Duration(alice.call("tasks/get", map[string]any{"taskId": live}).Result["ttlMs"].(float64)) * time.Millisecond
	clock.Advance(ttl + time.Second)

	params := map[string]func(id string) map[string]any{
		"tasks/get": func(id string) map[string]any { return map[string]any{"taskId": id} },
		"tasks/update": func(id string) map[string]any {
			return map[string]any{"taskId": id, "inputResponses": map[string]any{}}
		},
		"tasks/cancel": func(id string) map[string]any { return map[string]any{"taskId": id} },
		"subscriptions/listen": func(id string) map[string]any {
			return map[string]any{"notifications": map[string]any{"taskIds": []string{id}}}
		},
	}
	for _, who := range []string{"secret-alice-1234", "secret-bob-5678"} {
		for method, p := range params {
			for _, tid := range []string{live, ended} {
				unknown := tid[:len(tid)-1] + map[bool]string{true: "0", false: "1"}[tid[len(tid)-1] != '0'] // same shape, never issued
				es, expired := rawExchange(t, s.url, who, method, p(tid))
				us, unk := rawExchange(t, s.url, who, method, p(unknown))
				if es != us || strings.ReplaceAll(expired, tid, unknown) != unk {
					t.Errorf("%s as %s: expired %d %s\nunknown %d %s", method, who[:10], es, expired, us, unk)
				}
			}
		}
	}
}
