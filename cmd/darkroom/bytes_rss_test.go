package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/generation"
)

const (
	aliceKey = "alice-bytes-key-0123456789abcdef"
	bobKey   = "bob-bytes-key-0123456789abcdef01"
)

// bigOutputs makes one completed generation for alice and one for bob in
// a new data folder, then makes alice's output size bytes of random data
// (in the store and in its record) while no server runs. It returns the
// folder, both generation ids and the big output's raw bytes.
func bigOutputs(t *testing.T, size int) (data, alice, bob string, raw []byte) {
	t.Helper()
	data = t.TempDir()
	if databaseURL(t, data) != "" {
		t.Skip("the record is rewritten in SQLite")
	}
	p := startProcess(t, data, "DARKROOM_LOCAL_LATENCY=0", "DARKROOM_API_KEYS=alice="+aliceKey+",bob="+bobKey)
	gen := func(key string) string {
		c := &rpcClient{t: t, url: p.url, token: key, caps: map[string]any{}}
		r := c.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "big", "wait": true, "waitSeconds": 30})
		sc := r.Result["structuredContent"].(map[string]any)
		if sc["status"] != "completed" {
			t.Fatalf("generate: %v", r.Result)
		}
		return sc["generationId"].(string)
	}
	alice, bob = gen(aliceKey), gen(bobKey)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()

	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "darkroom.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var js string
	if err := db.QueryRow(`SELECT outputs FROM generations WHERE id = ?`, alice).Scan(&js); err != nil {
		t.Fatal(err)
	}
	var outs []generation.Output
	if err := json.Unmarshal([]byte(js), &outs); err != nil || len(outs) != 1 {
		t.Fatalf("outputs %s: %v", js, err)
	}
	raw = make([]byte, size)
	_, _ = rand.Read(raw)
	secret, err := os.ReadFile(filepath.Join(data, "link-secret"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.NewLocal(filepath.Join(data, "files"), secret, "http://unused")
	if err != nil {
		t.Fatal(err)
	}
	obj, err := store.Put(context.Background(), outs[0].Key, bytes.NewReader(raw), outs[0].MimeType, int64(size))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	outs[0].Bytes, outs[0].SHA256 = obj.Size, hex.EncodeToString(sum[:])
	b, _ := json.Marshal(outs)
	if _, err := db.Exec(`UPDATE generations SET outputs = ? WHERE id = ?`, string(b), alice); err != nil {
		t.Fatal(err)
	}
	return data, alice, bob, raw
}

// readBody is one request of the flood: method for the output of id.
func readBody(method, id string) []byte {
	uri := "darkroom://generations/" + id + "/outputs/0"
	params := map[string]any{"uri": uri, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/ui": map[string]any{}}},
	}}
	if method == "tools/call" {
		delete(params, "uri")
		params["name"] = "view_generation"
		params["arguments"] = map[string]any{"generationId": id, "output": 0}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	return b
}

func readRequest(url, key, method, id string) *http.Request {
	req, _ := http.NewRequest("POST", url+"/mcp", bytes.NewReader(readBody(method, id)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	name := "darkroom://generations/" + id + "/outputs/0"
	if method == "tools/call" {
		name = "view_generation"
	}
	req.Header.Set("Mcp-Name", name)
	return req
}

// neverRead sends a read and never reads its answer.
func neverRead(t *testing.T, url, key, method, id string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := readRequest(url, key, method, id).Write(c); err != nil {
		t.Fatal(err)
	}
	return c
}

type readReply struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

func doRead(t *testing.T, client *http.Client, url, key, method, id string) readReply {
	start := time.Now()
	resp, err := client.Do(readRequest(url, key, method, id))
	if err != nil {
		t.Errorf("%s: %v", method, err)
		return readReply{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s: read: %v", method, err)
	}
	return readReply{resp.StatusCode, resp.Header, b, time.Since(start)}
}

// blobOf returns the decoded blob of a read's reply.
func blobOf(t *testing.T, method string, body []byte) []byte {
	t.Helper()
	var msg struct {
		Result struct {
			Contents []struct{ Blob []byte } `json:"contents"`
			Content  []struct {
				Resource *struct{ Blob []byte } `json:"resource"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("%s: %v: %.300s", method, err, body)
	}
	if method == "resources/read" && len(msg.Result.Contents) == 1 {
		return msg.Result.Contents[0].Blob
	}
	for _, c := range msg.Result.Content {
		if c.Resource != nil {
			return c.Resource.Blob
		}
	}
	t.Fatalf("%s: no blob in %.300s", method, body)
	return nil
}

func peakRSS(t *testing.T, p *proc) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestOutputBytesBoundedRSS: one key reads a 30 MB output 20 times at
// once, on resources/read and on view_generation {output:0}, while 10
// clients send the same reads and never read their answers: the server
// process's peak RSS stays under 256 MiB, every read gets the exact bytes,
// and another key's read succeeds meanwhile.
func TestOutputBytesBoundedRSS(t *testing.T) {
	const size = 30 << 20
	data, alice, bob, raw := bigOutputs(t, size)
	p := startProcess(t, data, "DARKROOM_LOCAL_LATENCY=0", "DARKROOM_API_KEYS=alice="+aliceKey+",bob="+bobKey,
		"DARKROOM_POLL_RATE=1000", "DARKROOM_POLL_BURST=1000")
	base := peakRSS(t, p)
	for i := range 10 {
		neverRead(t, p.url, aliceKey, []string{"resources/read", "tools/call"}[i%2], alice)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, method := range []string{"resources/read", "tools/call"} {
		var wg sync.WaitGroup
		replies := make([]readReply, 20)
		for i := range replies {
			wg.Go(func() { replies[i] = doRead(t, client, p.url, aliceKey, method, alice) })
		}
		other := doRead(t, client, p.url, bobKey, method, bob)
		wg.Wait()
		if other.status != 200 || !bytes.Contains(other.body, []byte(`"result"`)) {
			t.Errorf("%s: bob's read during alice's flood: %d %.300s", method, other.status, other.body)
		}
		// The blob of every read, not the whole reply: a tool result's text
		// (a link's lifetime) may change between reads a second apart.
		for i, r := range replies {
			if r.status != 200 {
				t.Fatalf("%s: read %d: %d %.300s", method, i, r.status, r.body)
			}
			if got := blobOf(t, method, r.body); !bytes.Equal(got, raw) {
				t.Fatalf("%s: read %d: the blob is not the output (%d bytes)", method, i, len(got))
			}
		}
		// Streamed, not built: about 4/3 of the blob.
		if n := len(replies[0].body); n < base64.StdEncoding.EncodedLen(size) || n > base64.StdEncoding.EncodedLen(size)+4096 {
			t.Errorf("%s: reply of %d bytes", method, n)
		}
	}
	peak := peakRSS(t, p)
	t.Logf("peak RSS of the server: %.1f MiB (%.1f MiB after start), 20 reads of a %d MiB output on each path, 10 clients never reading", float64(peak)/(1<<20), float64(base)/(1<<20), size>>20)
	if peak >= 256<<20 {
		t.Errorf("peak RSS %d MiB, want under 256 MiB", peak>>20)
	}
}

// TestOutputBytesRefusedPastBudget: with a 1 MiB budget (half of it per
// key), clients that never read take all of one key's share: that key's
// next read is refused at once (429, Retry-After, -31429 with
// retryAfterMs), on go-sdk's path too (a 2025-03-26 batch); another key
// still reads; and once the write timeout cuts the clients that never
// read, their shares are back.
func TestOutputBytesRefusedPastBudget(t *testing.T) {
	data, alice, bob, _ := bigOutputs(t, 30<<20)
	p := startProcess(t, data, "DARKROOM_LOCAL_LATENCY=0", "DARKROOM_API_KEYS=alice="+aliceKey+",bob="+bobKey,
		"DARKROOM_POLL_RATE=1000", "DARKROOM_POLL_BURST=1000", "DARKROOM_OUTPUT_BYTES=1048576", "DARKROOM_WRITE_TIMEOUT=3s")
	client := &http.Client{Transport: &http.Transport{}}
	refused := func(r readReply) bool {
		var msg struct {
			Error struct {
				Code int64 `json:"code"`
				Data struct {
					RetryAfterMs int64 `json:"retryAfterMs"`
				} `json:"data"`
			} `json:"error"`
		}
		_ = json.Unmarshal(r.body, &msg)
		return r.status == http.StatusTooManyRequests && r.header.Get("Retry-After") != "" &&
			msg.Error.Code == -31429 && msg.Error.Data.RetryAfterMs > 0
	}
	// Ten reads whose answers are never read past their headers: the
	// first ones take alice's share and stay stuck in their sockets, the
	// rest are refused at once.
	var stuck []*http.Response
	refusals := 0
	for range 10 {
		c := neverRead(t, p.url, aliceKey, "resources/read", alice)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			stuck = append(stuck, resp)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		if !refused(readReply{status: resp.StatusCode, header: resp.Header, body: b}) {
			t.Fatalf("a read past alice's share: %d %.300s", resp.StatusCode, b)
		}
		refusals++
	}
	if len(stuck) == 0 || refusals == 0 {
		t.Fatalf("%d reads held, %d refused: want both", len(stuck), refusals)
	}
	r := doRead(t, client, p.url, aliceKey, "tools/call", alice)
	if !refused(r) {
		t.Fatalf("alice past her share: %d %.300s", r.status, r.body)
	}
	if r.took > 2*time.Second {
		t.Errorf("the refusal took %v", r.took)
	}
	if r := doRead(t, client, p.url, bobKey, "resources/read", bob); r.status != 200 || !bytes.Contains(r.body, []byte(`"blob"`)) {
		t.Errorf("bob's read while alice is at her share: %d %.300s", r.status, r.body)
	}
	// go-sdk's path counts the resident copies: a 30 MB read needs more
	// than the whole budget.
	batch := fmt.Sprintf(`[{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"darkroom://generations/%s/outputs/0"}}]`, alice)
	req, _ := http.NewRequest("POST", p.url+"/mcp", strings.NewReader(batch))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b, []byte(`"code":-31429`)) || !bytes.Contains(b, []byte(`"retryAfterMs":`)) {
		t.Errorf("go-sdk path past the budget: %d %.400s", resp.StatusCode, b)
	}
	// The write timeout cuts the clients that never read, and their
	// shares are back: alice reads again (retrying as the refusals say).
	ok := false
	for range 30 {
		r = doRead(t, client, p.url, aliceKey, "resources/read", alice)
		if ok = r.status == 200 && bytes.Contains(r.body, []byte(`"blob"`)); ok || !refused(r) {
			break
		}
		time.Sleep(time.Second) // the Retry-After the refusal named
	}
	if !ok {
		t.Errorf("alice after the stuck clients were cut: %d %.300s", r.status, r.body)
	}
	// Each of them sees its answer end short of its length.
	for _, resp := range stuck {
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil || n >= resp.ContentLength {
			t.Errorf("a client that never read got its whole answer (%d bytes, %v)", n, err)
		}
	}
}
