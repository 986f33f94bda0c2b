package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// connServer is darkroom behind server.HTTPServer (as serve runs it) with
// every connection bound set to bound, and one API key.
func connServer(t *testing.T, bound time.Duration, latency float64, opts ...func(*config)) (addr string, a *app) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := auth.ParseKeyList("conn=secret-conn-1234", "test")
	cfg.DataDir, cfg.PublicURL, cfg.LocalLatency = t.TempDir(), "http://"+ln.Addr().String(), latency
	cfg.Auth = auth.Config{Keys: keys}
	cfg.PollRate, cfg.PollBurst = 1e6, 1e6
	for _, o := range opts {
		o(cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if a, err = build(ctx, cfg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	srv := server.HTTPServer(a.handler(), server.Timeouts{ReadHeader: bound, Read: bound, Write: bound, Idle: bound})
	go func() { _ = srv.Serve(ln) }()
	done := a.background(ctx)
	t.Cleanup(func() {
		_ = srv.Close()
		cancel()
		<-done
		_ = a.close()
	})
	return ln.Addr().String(), a
}

// TestStalledConnectionsAreClosed opens hundreds of connections that stall
// (headers sent and body stalled with a valid key; headers
// half sent; nothing sent; idle after a request) and checks that the
// server closes each after its bound while a normal client is served
// meanwhile; the figures go to the test log.
func TestStalledConnectionsAreClosed(t *testing.T) {
	const perKind = 120
	bound := 400 * time.Millisecond
	slack := 5 * time.Second // -race on two shared cores
	addr, _ := connServer(t, bound, 0)
	const token = "secret-conn-1234"
	post := func(auth bool) string {
		h := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n"
		if auth {
			h += "Authorization: Bearer " + token + "\r\n"
		}
		return h + "\r\n" + `{"jsonrpc":"2.0","id":1,`
	}
	kinds := []struct {
		name string
		send string
		idle bool   // complete one request first, then sit idle
		from string // source address: the pre-auth guess guard throttles an
		// address whose requests are answered 401, so those come from another
	}{
		{"body stalled, valid key", post(true), false, ""},
		{"headers half sent", "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: app", false, ""},
		{"nothing sent", "", false, ""},
		{"idle after a request", "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", true, ""},
	}
	type result struct {
		kind   int
		closed time.Duration
		err    error
	}
	base := normalClient(t, addr, token)
	results := make(chan result, perKind*len(kinds))
	var ready sync.WaitGroup
	for k, kind := range kinds {
		for range perKind {
			ready.Add(1)
			go func() {
				var d net.Dialer
				if kind.from != "" {
					d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(kind.from)}
				}
				start := time.Now() // the server's bounds start at or after this
				c, err := d.Dial("tcp", addr)
				if err != nil {
					ready.Done()
					results <- result{k, 0, err}
					return
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(bound + slack + 10*time.Second)) // the test never hangs
				if _, err := io.WriteString(c, kind.send); err != nil {
					ready.Done()
					results <- result{k, 0, err}
					return
				}
				br := bufio.NewReader(c)
				if kind.idle {
					resp, err := http.ReadResponse(br, nil)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
				ready.Done()
				_, err = io.Copy(io.Discard, br) // until the server closes
				results <- result{k, time.Since(start), err}
			}()
		}
	}
	ready.Wait()

	lat := normalClient(t, addr, token)
	byKind := make([][]time.Duration, len(kinds))
	for range perKind * len(kinds) {
		r := <-results
		if r.err != nil {
			t.Fatalf("%s: %v", kinds[r.kind].name, r.err)
		}
		byKind[r.kind] = append(byKind[r.kind], r.closed)
	}
	for k, d := range byKind {
		slices.Sort(d)
		t.Logf("%d connections %q: closed after min %v, median %v, max %v (bound %v)",
			perKind, kinds[k].name, d[0].Round(time.Millisecond), d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond), bound)
		if d[0] < bound*9/10 || d[len(d)-1] > bound+slack {
			t.Errorf("%q: closed between %v and %v, want within [%v, %v]", kinds[k].name, d[0], d[len(d)-1], bound*9/10, bound+slack)
		}
	}
	med := func(d []time.Duration) time.Duration { return d[len(d)/2].Round(time.Microsecond) }
	t.Logf("normal client, %d sequential tools/call list_models: alone median %v, max %v; while %d connections stalled median %v, max %v",
		len(lat), med(base), base[len(base)-1].Round(time.Microsecond), perKind*len(kinds), med(lat), lat[len(lat)-1].Round(time.Microsecond))
}

// normalClient sends 50 sequential requests and returns their latencies,
// sorted; any failure fails the test.
func normalClient(t *testing.T, addr, token string) []time.Duration {
	t.Helper()
	// Its own connections: one left idle past the idle bound would be
	// closed under a reused POST.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	var lat []time.Duration
	for i := range 50 {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_models","arguments":{}}}`, i)
		req, _ := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("normal request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(t0))
		if resp.StatusCode != 200 {
			t.Fatalf("normal request %d: HTTP %d", i, resp.StatusCode)
		}
	}
	slices.Sort(lat)
	return lat
}

// TestLongResponsesOutliveTheBounds: a response that takes several times
// every bound to come (wait_generation on a generation of about a second
// or more) is delivered whole: the body deadline ends with the body, and
// the write deadline is counted from each write.
func TestLongResponsesOutliveTheBounds(t *testing.T) {
	bound := 250 * time.Millisecond
	addr, _ := connServer(t, bound, 1)
	rc := &rpcClient{t: t, url: "http://" + addr, token: "secret-conn-1234", caps: map[string]any{}}
	g := rc.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "slow enough"})
	id, _ := g.Result["structuredContent"].(map[string]any)["generationId"].(string)
	if id == "" {
		t.Fatalf("generate: %+v", g)
	}
	t0 := time.Now()
	r := rc.tool("wait_generation", map[string]any{"generationId": id, "timeoutSeconds": 30})
	took := time.Since(t0)
	sc, _ := r.Result["structuredContent"].(map[string]any)
	if r.Status != 200 || sc["status"] != "completed" {
		t.Fatalf("wait_generation after %v: %d %+v", took, r.Status, r)
	}
	if took < 3*bound {
		t.Fatalf("the wait took %v, not long enough to outlive the %v bounds: the check proves nothing", took, bound)
	}
	t.Logf("a response after %v of silence was delivered with every bound at %v", took.Round(time.Millisecond), bound)
}

// TestRefusedBodiesAreNotWaitedFor: a request answered without its body
// being read (no token or a bad one on /mcp, anything on /healthz) gets
// its answer at once and its connection closed, although it announced a
// body it never sends; net/http would otherwise wait the whole read
// timeout to discard that body. A client with a valid key that sends its
// body slowly is still read to the end and served. The figures go to the
// test log.
func TestRefusedBodiesAreNotWaitedFor(t *testing.T) {
	const perKind = 50
	bound := 30 * time.Second // every connection bound: far longer than the wait allowed
	addr, _ := connServer(t, bound, 0)
	const token = "secret-conn-1234"
	head := func(path, auth string) string {
		h := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n"
		if auth != "" {
			h += "Authorization: Bearer " + auth + "\r\n"
		}
		return h + "\r\n" + `{"jsonrpc":"2.0","id":1,`
	}
	kinds := []struct {
		name, send string
		status     int
	}{
		{"/mcp, no token", head("/mcp", ""), http.StatusUnauthorized},
		{"/mcp, bad token", head("/mcp", "not-the-key-0000"), http.StatusUnauthorized},
		{"/healthz, no token", head("/healthz", ""), http.StatusOK},
		{"/healthz, bad token", head("/healthz", "not-the-key-0000"), http.StatusOK},
	}
	type result struct {
		kind   int
		status int
		closed time.Duration
		err    error
	}
	results := make(chan result, perKind*len(kinds))
	for k, kind := range kinds {
		for range perKind {
			go func() {
				start := time.Now()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					results <- result{kind: k, err: err}
					return
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(bound)) // the test never hangs
				if _, err := io.WriteString(c, kind.send); err != nil {
					results <- result{kind: k, err: err}
					return
				}
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					results <- result{kind: k, err: err}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				_, err = io.Copy(io.Discard, br) // until the server closes
				results <- result{k, resp.StatusCode, time.Since(start), err}
			}()
		}
	}
	byKind := make([][]time.Duration, len(kinds))
	for range perKind * len(kinds) {
		r := <-results
		if r.err != nil {
			t.Fatalf("%s: %v", kinds[r.kind].name, r.err)
		}
		if r.status != kinds[r.kind].status {
			t.Errorf("%s: HTTP %d, want %d", kinds[r.kind].name, r.status, kinds[r.kind].status)
		}
		byKind[r.kind] = append(byKind[r.kind], r.closed)
	}
	for k, d := range byKind {
		slices.Sort(d)
		t.Logf("%d connections %q: answered and closed after median %v, max %v (read timeout %v)",
			perKind, kinds[k].name, d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond), bound)
		if d[len(d)-1] > time.Second {
			t.Errorf("%q: the last connection was released after %v, want within 1s", kinds[k].name, d[len(d)-1])
		}
	}

	// A slow upload with the key: its body arrives in pieces, is read to
	// the end and answered, on a connection kept for the next request.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(bound))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_models","arguments":{}}}`
	h := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
		"Authorization: Bearer " + token + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := io.WriteString(c, h); err != nil {
		t.Fatal(err)
	}
	for piece := range slices.Chunk([]byte(body), len(body)/4+1) {
		time.Sleep(100 * time.Millisecond) // a slow client, not a wait for the server
		if _, err := c.Write(piece); err != nil {
			t.Fatalf("the slow upload was cut: %v", err)
		}
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("slow upload: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "local-sketch") || resp.Close {
		t.Fatalf("slow upload: HTTP %d (close %v) %s", resp.StatusCode, resp.Close, b)
	}
}

// TestUnpaidBodiesAreNotParsed: a large body its caller cannot pay is
// refused (429, -31429, Retry-After) before it is parsed: a body that
// is not even JSON gets the 429, not -32700. One of up to 256 KiB is read
// and its connection kept; a larger one is refused without waiting for the
// rest and its connection closed. Unpaid means: a declared length past the
// byte bucket (any method), a declared poll method past an empty poll
// bucket, or a listen while the bucket holds less than the caller's last
// refused listen. A small poll is read and answered as ever.
func TestUnpaidBodiesAreNotParsed(t *testing.T) {
	const token = "secret-conn-1234"
	ext := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	get := rpcBody(3, "tasks/get", map[string]any{"taskId": "t-1"}, ext)
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = tasks.NewID()
	}
	listen := rpcBody(4, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": ids}}, ext)
	garbage := bytes.Repeat([]byte("x"), 40<<10) // no JSON: parsed, it is -32700
	big := rpcBody(5, "tools/call", map[string]any{"name": "list_models", "arguments": map[string]any{"pad": strings.Repeat("x", 40<<10)}}, ext)
	type step struct {
		method string
		name   string // Mcp-Name
		body   []byte
		length int    // declared; the body may stop short of it
		want   string // in the answer: "-31429" refused, else the answer's own
		close  bool
	}
	tests := []struct {
		name  string
		opt   func(*config)
		steps []step
	}{
		{"empty poll bucket", func(c *config) { c.PollRate, c.PollBurst = 1e-9, 1 }, []step{
			{"tasks/get", "t-1", get, len(get), `"id":3`, false}, // the one token
			{"tasks/get", "t-1", get, len(get), `"id":3,"error":{"code":-31429`, false},
			{"subscriptions/listen", "", garbage, len(garbage), "-31429", false},
			{"subscriptions/listen", "", listen[:100], 1 << 20, "-31429", true},
		}},
		{"a refused listen is owed", func(c *config) { c.PollRate, c.PollBurst = 1e-9, 3 }, []step{
			{"tasks/get", "t-1", get, len(get), `"id":3`, false},
			{"subscriptions/listen", "", listen, len(listen), `"id":4,"error":{"code":-31429`, false}, // parsed: 2 of 20 tokens
			{"subscriptions/listen", "", garbage, len(garbage), "-31429", false},                      // 2 tokens are not the 20 owed
			{"tasks/get", "t-1", get, len(get), `"id":3,"error":{"code":-32602`, false},               // polls are not owed
		}},
		{"byte bucket", func(c *config) { c.ByteRate, c.ByteBurst = 1, 48<<10 }, []step{
			{"tools/call", "list_models", big, len(big), `"id":5,"result"`, false}, // 40 of the 48 KiB
			{"tools/call", "list_models", garbage, len(garbage), "-31429", false},
			{"tools/call", "list_models", garbage[:100], 1 << 20, "-31429", true},
			{"tasks/get", "t-1", get, len(get), `"id":3,"error":{"code":-32602`, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, _ := connServer(t, 30*time.Second, 0, tt.opt)
			var c net.Conn
			var br *bufio.Reader
			for i, st := range tt.steps {
				if c == nil {
					var err error
					if c, err = net.Dial("tcp", addr); err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // the test never hangs
					br = bufio.NewReader(c)
				}
				req := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: " + strconv.Itoa(st.length) + "\r\n"
				for k, v := range rpcHeaders(st.method, st.name, token) {
					req += k + ": " + v + "\r\n"
				}
				if _, err := io.WriteString(c, req+"\r\n"+string(st.body)); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("step %d (%s): %v", i, st.method, err)
				}
				b, _ := io.ReadAll(resp.Body)
				if !strings.Contains(string(b), st.want) {
					t.Fatalf("step %d (%s): HTTP %d %.300s; want %s", i, st.method, resp.StatusCode, b, st.want)
				}
				if st.want == "-31429" && (resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "") {
					t.Fatalf("step %d: HTTP %d %v", i, resp.StatusCode, resp.Header)
				}
				if resp.Close != st.close {
					t.Fatalf("step %d: connection closed %v, want %v", i, resp.Close, st.close)
				}
				if resp.Close {
					c.Close()
					c = nil
				}
			}
		})
	}
}
