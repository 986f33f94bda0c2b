package imagetest

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The image's promises these tests hold it to.
const (
	imageUID      = 65532
	maxImageBytes = 40e6
	// docker stop (and podman stop) send STOPSIGNAL, wait 10 s, then
	// SIGKILL: the image's drain must end before that.
	engineStopWait = 10 * time.Second
)

func needImage(t *testing.T) string {
	t.Helper()
	img := os.Getenv("DARKROOM_IMAGE")
	if img == "" {
		t.Skip("DARKROOM_IMAGE is not set: make image-test builds the image and runs these checks")
	}
	return img
}

// container is darkroom running in the engine, its port published on
// 127.0.0.1 and DARKROOM_PUBLIC_URL set to it.
type container struct {
	name, url, token string
}

type runOpts struct {
	volume string   // named volume on /data
	port   int      // host port (0: a free one)
	env    []string // more -e
	args   []string // more engine run flags
}

func start(t *testing.T, o runOpts) *container {
	t.Helper()
	img := needImage(t)
	if o.port == 0 {
		o.port = freePort(t)
	}
	c := &container{name: "darkroom-it-" + randomHex(4), url: fmt.Sprintf("http://127.0.0.1:%d", o.port), token: "it-" + randomHex(16)}
	args := []string{"run", "-d", "--name", c.name, "-p", fmt.Sprintf("127.0.0.1:%d:8080", o.port),
		"-e", "DARKROOM_API_KEYS=imagetest=" + c.token, "-e", "DARKROOM_PUBLIC_URL=" + c.url, "-e", "DARKROOM_LOCAL_LATENCY=0.2"}
	if o.volume != "" {
		args = append(args, "-v", o.volume+":/data")
	}
	for _, e := range o.env {
		args = append(args, "-e", e)
	}
	args = append(append(args, o.args...), img)
	mustEng(t, args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of %s:\n%s", c.name, logsOf(c.name))
		}
		_, _ = eng("rm", "-f", "-v", "-t", "0", c.name)
	})
	c.waitReady(t)
	return c
}

func (c *container) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for status(c.url+"/readyz") != 200 {
		if st, _ := eng("inspect", "--format", "{{.State.Status}}", c.name); st == "exited" {
			t.Fatalf("%s exited before /readyz answered 200:\n%s", c.name, logsOf(c.name))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /readyz not 200 after 60 s", c.name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func volume(t *testing.T) string {
	t.Helper()
	needImage(t) // before the engine is asked for anything: go test ./... runs without one
	name := "darkroom-it-" + randomHex(4)
	mustEng(t, "volume", "create", name)
	t.Cleanup(func() { _, _ = eng("volume", "rm", "-f", name) })
	return name
}

// imageConfig is what both engines' image inspect say about the config
// (Podman names the health check at the top level, Docker in Config).
type imageConfig struct {
	Size   int64
	Config struct {
		User         string
		Env          []string
		ExposedPorts map[string]any
		Volumes      map[string]any
		StopSignal   string
		Entrypoint   []string
		Healthcheck  *struct{ Test []string }
		Labels       map[string]string
	}
	Healthcheck *struct{ Test []string }
}

func inspectImage(t *testing.T, img string) imageConfig {
	t.Helper()
	var cfg []imageConfig
	if err := json.Unmarshal([]byte(mustEng(t, "image", "inspect", img)), &cfg); err != nil || len(cfg) != 1 {
		t.Fatalf("image inspect %s: %v", img, err)
	}
	return cfg[0]
}

func envOf(cfg imageConfig, k string) string {
	for _, e := range cfg.Config.Env {
		if v, ok := strings.CutPrefix(e, k+"="); ok {
			return v
		}
	}
	return ""
}

// TestImageConfig: the image declares what README says: nonroot, port
// 8080, VOLUME /data, a HEALTHCHECK through the binary, SIGTERM as its
// stop signal and a shutdown grace that ends before the engine's 10 s
// SIGKILL; its size is under the goal; and it carries the label the MCP
// Registry reads to tie the image to server.json's name.
func TestImageConfig(t *testing.T) {
	img := needImage(t)
	cfg := inspectImage(t, img)
	t.Logf("image %s: %.1f MB (goal < %.0f MB)", img, float64(cfg.Size)/1e6, maxImageBytes/1e6)
	if cfg.Size <= 0 || float64(cfg.Size) >= maxImageBytes {
		t.Errorf("image size %d bytes, want under %.0f", cfg.Size, maxImageBytes)
	}
	if u := cfg.Config.User; u != "nonroot" && u != strconv.Itoa(imageUID) {
		t.Errorf("USER %q, want nonroot (%d)", u, imageUID)
	}
	if _, ok := cfg.Config.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("EXPOSE: %v, want 8080/tcp", cfg.Config.ExposedPorts)
	}
	if _, ok := cfg.Config.Volumes["/data"]; !ok {
		t.Errorf("VOLUME: %v, want /data", cfg.Config.Volumes)
	}
	hc := cfg.Healthcheck
	if hc == nil {
		hc = cfg.Config.Healthcheck
	}
	if hc == nil || strings.Join(hc.Test, " ") != "CMD /darkroom healthcheck" {
		t.Errorf("HEALTHCHECK %+v, want CMD /darkroom healthcheck (built with --format docker?)", hc)
	}
	var entry struct{ Name string }
	if b, err := os.ReadFile("../../server.json"); err != nil || json.Unmarshal(b, &entry) != nil || entry.Name == "" {
		t.Errorf("server.json's name: %v", err)
	} else if got := cfg.Config.Labels["io.modelcontextprotocol.server.name"]; got != entry.Name {
		t.Errorf("LABEL io.modelcontextprotocol.server.name=%q, want server.json's %q", got, entry.Name)
	}
	if s := cfg.Config.StopSignal; s != "SIGTERM" {
		t.Errorf("STOPSIGNAL %q, want SIGTERM (darkroom drains on it)", s)
	}
	grace, err := time.ParseDuration(envOf(cfg, "DARKROOM_SHUTDOWN_GRACE"))
	if err != nil {
		t.Errorf("DARKROOM_SHUTDOWN_GRACE in the image: %v", err)
	} else if grace >= engineStopWait-time.Second {
		t.Errorf("the image's DARKROOM_SHUTDOWN_GRACE is %v: docker stop kills after %v, so the drain would be cut", grace, engineStopWait)
	}
}

// TestImageRefusesWithoutKeys: on 0.0.0.0 with no API keys or OAuth the
// container exits non-zero and its log says what to set.
func TestImageRefusesWithoutKeys(t *testing.T) {
	img := needImage(t)
	name := "darkroom-it-" + randomHex(4)
	mustEng(t, "run", "-d", "--name", name, img)
	defer func() { _, _ = eng("rm", "-f", "-v", "-t", "0", name) }()
	done := make(chan string, 1)
	go func() { out, _ := eng("wait", name); done <- out }()
	var code string
	select {
	case code = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("darkroom without keys on 0.0.0.0 is still running after 30 s")
	}
	logs := logsOf(name)
	t.Logf("exit %s: %s", code, firstLine(logs, "refusing"))
	if code == "0" || code == "" {
		t.Errorf("exit code %q, want non-zero", code)
	}
	for _, want := range []string{"refusing to listen", "DARKROOM_API_KEYS"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
}

func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// healthcheck runs the image's HEALTHCHECK once and reports the status
// the engine then holds. Docker has no "healthcheck run": its own
// schedule is waited on instead.
func healthcheck(t *testing.T, name string) (state string, ran error) {
	t.Helper()
	if engine() == "podman" {
		_, ran = eng("healthcheck", "run", name)
		for _, f := range []string{"{{.State.Health.Status}}", "{{.State.Healthcheck.Status}}"} {
			if s, err := eng("inspect", "--format", f, name); err == nil && s != "" && s != "<no value>" {
				return s, ran
			}
		}
		return "", ran
	}
	s, _ := eng("inspect", "--format", "{{.State.Health.Status}}", name)
	return s, nil
}

// TestImageHealthcheck: with keys it starts, /readyz is 200 and the
// health check is healthy; with the server wedged (its process stopped
// with SIGSTOP) the check fails and the container turns unhealthy, and
// healthy again once it runs on.
func TestImageHealthcheck(t *testing.T) {
	needImage(t)
	t.Parallel() // mostly waiting out the start period
	started := time.Now()
	c := start(t, runOpts{env: []string{"DARKROOM_HEALTHCHECK_TIMEOUT=1s"}})
	if engine() == "docker" {
		eventually(t, 90*time.Second, func() bool { s, _ := healthcheck(t, c.name); return s == "healthy" }, "docker to report healthy")
	} else if s, err := healthcheck(t, c.name); err != nil || s != "healthy" {
		t.Fatalf("healthcheck run: %v, status %q; want healthy", err, s)
	}
	t.Logf("/readyz 200 and healthy")
	mustEng(t, "kill", "--signal", "SIGSTOP", c.name)
	if engine() == "docker" {
		eventually(t, 150*time.Second, func() bool { s, _ := healthcheck(t, c.name); return s == "unhealthy" }, "docker to report unhealthy")
	} else {
		// Failures in the start period (--start-period=15s) do not count.
		time.Sleep(time.Until(started.Add(16 * time.Second)))
		var last string
		for i := range 3 { // --retries=3
			s, err := healthcheck(t, c.name)
			if err == nil {
				t.Fatalf("healthcheck run %d on a stopped server passed (status %q)", i+1, s)
			}
			last = s
		}
		if last != "unhealthy" {
			t.Fatalf("after 3 failed checks the status is %q, want unhealthy", last)
		}
	}
	t.Logf("wedged: unhealthy")
	mustEng(t, "kill", "--signal", "SIGCONT", c.name)
	if engine() == "podman" {
		if s, err := healthcheck(t, c.name); err != nil || s != "healthy" {
			t.Fatalf("after SIGCONT: %v, status %q; want healthy", err, s)
		}
	}
}

// engineMade are the files the engine puts in every container.
var engineMade = map[string]bool{"/etc/hostname": true, "/etc/hosts": true, "/etc/mtab": true, "/etc/resolv.conf": true,
	"/run/.containerenv": true, "/.dockerenv": true}

// TestImageNonrootNoShell: the server process runs as uid and gid 65532,
// and the image's file system holds one executable, /darkroom: no shell,
// no package manager.
func TestImageNonrootNoShell(t *testing.T) {
	c := start(t, runOpts{})
	pid := mustEng(t, "inspect", "--format", "{{.State.Pid}}", c.name)
	st, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatalf("the container's process: %v", err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && (k == "Uid" || k == "Gid") {
			for _, id := range strings.Fields(v) {
				if id != strconv.Itoa(imageUID) {
					t.Errorf("%s: %s, want %d throughout", k, strings.TrimSpace(v), imageUID)
					break
				}
			}
		}
	}
	// The file system, as the engine exports it.
	cmd := exec.Command(engine(), "export", c.name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var execs, files []string
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimPrefix(path.Clean(h.Name), "./")
		if engineMade[p] {
			continue
		}
		files = append(files, p)
		if (h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeSymlink) && h.Mode&0o111 != 0 &&
			!strings.HasPrefix(p, "/usr/share/zoneinfo/") {
			execs = append(execs, p)
		}
		for _, bad := range []string{"/bin/sh", "/bin/bash", "/bin/dash", "/bin/busybox", "/usr/bin/apt", "/usr/bin/apt-get",
			"/usr/bin/dpkg", "/sbin/apk", "/usr/bin/env", "/usr/bin/curl", "/usr/bin/wget"} {
			if p == bad {
				t.Errorf("the image holds %s", p)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d entries in the file system; executables: %v", len(files), execs)
	if len(execs) != 1 || execs[0] != "/darkroom" {
		t.Errorf("executables in the image: %v, want only /darkroom", execs)
	}
	if err := exec.Command(engine(), "exec", c.name, "/bin/sh", "-c", "true").Run(); err == nil {
		t.Errorf("exec /bin/sh in the container worked")
	}
}

// TestImageGeneration: in a container with a read-only root file system
// (only the /data volume writable, no tmpfs), a generation on the local
// provider completes through the published port and its signed link,
// built on DARKROOM_PUBLIC_URL, downloads.
func TestImageGeneration(t *testing.T) {
	ro := []string{"--read-only"}
	if engine() == "podman" {
		ro = append(ro, "--read-only-tmpfs=false")
	}
	c := start(t, runOpts{volume: volume(t), args: ro})
	cs := connect(t, c.url, c.token, "2026-07-28")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "a container ship at dawn"}, &g)
	w := waitDone(t, cs, g.GenerationID)
	if w.Status != "completed" || len(w.Outputs) == 0 {
		t.Fatalf("generation %s: %s (%s)", g.GenerationID, w.Status, w.StatusMessage)
	}
	n := download(t, c.url, w.Outputs[0].URL, w.Outputs[0].SHA256)
	t.Logf("generation %s completed; %d bytes from %s", w.GenerationID, n, w.Outputs[0].URL)
}

// TestImageVolumeSurvives: a generation made in one container, which is
// then removed, is there in a new container on the same named volume,
// and its old signed link still downloads.
func TestImageVolumeSurvives(t *testing.T) {
	vol, port := volume(t), freePort(t)
	a := start(t, runOpts{volume: vol, port: port})
	cs := connect(t, a.url, a.token, "2026-07-28")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "kept"}, &g)
	w := waitDone(t, cs, g.GenerationID)
	if w.Status != "completed" || len(w.Outputs) == 0 {
		t.Fatalf("generation: %s (%s)", w.Status, w.StatusMessage)
	}
	_ = cs.Close()
	mustEng(t, "rm", "-f", "-v", "-t", "0", a.name)

	b := start(t, runOpts{volume: vol, port: port})
	cs = connect(t, b.url, b.token, "2026-07-28")
	var got genView
	call(t, cs, "get_generation", map[string]any{"generationId": g.GenerationID}, &got)
	if got.Status != "completed" || len(got.Outputs) == 0 {
		t.Fatalf("in the new container %s is %q", g.GenerationID, got.Status)
	}
	download(t, b.url, w.Outputs[0].URL, w.Outputs[0].SHA256)
	download(t, b.url, got.Outputs[0].URL, got.Outputs[0].SHA256)
	t.Logf("%s and its link survived the container's replacement", g.GenerationID)
}

// TestImageStopDrains: `stop` with the engine's default 10 s, while a
// video is at the provider, a bounded wait is in flight and a slow client
// is still sending its body (it holds the drain until the grace period
// ends). darkroom drains and exits 0 by itself before the engine's
// SIGKILL (an image grace longer than the stop timeout fails here); the
// wait is answered, and the video completes in a new container on the
// same volume.
func TestImageStopDrains(t *testing.T) {
	needImage(t)
	t.Parallel() // mostly waiting on the drain, beside TestImageHealthcheck
	vol, port := volume(t), freePort(t)
	a := start(t, runOpts{volume: vol, port: port, env: []string{"DARKROOM_LOCAL_LATENCY=1"}})
	cs := connect(t, a.url, a.token, "2026-07-28")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-motion", "prompt": "a slow pan"}, &g)

	var wg sync.WaitGroup
	var waitErr error
	var waited genView
	wg.Go(func() {
		waitErr = callTool(cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 60}, &waited)
	})
	// A client that sends its body one byte a second.
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{", port, a.token)
	trickle := make(chan struct{})
	go func() {
		defer close(trickle)
		for range 60 {
			time.Sleep(time.Second)
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	time.Sleep(time.Second)

	t0 := time.Now()
	if _, err := eng("stop", a.name); err != nil { // the engine's default timeout: 10 s
		t.Fatal(err)
	}
	took := time.Since(t0)
	wg.Wait()
	code := mustEng(t, "inspect", "--format", "{{.State.ExitCode}}", a.name)
	logs := logsOf(a.name)
	t.Logf("stop took %v, exit %s; %s", took.Round(10*time.Millisecond), code, firstLine(logs, "stopped;"))
	if code != "0" || took >= engineStopWait {
		t.Errorf("stop took %v and the exit code is %s: the drain did not end before the engine's %v SIGKILL", took, code, engineStopWait)
	}
	if !strings.Contains(logs, `"msg":"stopped;`) {
		t.Errorf("no drain-complete line in the log:\n%s", logs)
	}
	if waitErr != nil {
		t.Errorf("the bounded wait in flight at the stop was not answered: %v", waitErr)
	} else {
		t.Logf("the wait in flight answered %s (timedOut %v)", waited.Status, waited.TimedOut != nil && *waited.TimedOut)
	}

	b := start(t, runOpts{volume: vol, port: port, env: []string{"DARKROOM_LOCAL_LATENCY=0.2"}})
	cs = connect(t, b.url, b.token, "2026-07-28")
	if w := waitDone(t, cs, g.GenerationID); w.Status != "completed" {
		t.Fatalf("after the stop %s ended %s (%s)", g.GenerationID, w.Status, w.StatusMessage)
	}
}
