package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestClientCommand(t *testing.T) {
	s := startServer(t, 0)
	state := filepath.Join(t.TempDir(), "client.db")
	var out bytes.Buffer
	err := runClient(context.Background(), []string{"--endpoint", s.url + "/mcp", "--state", state,
		"call", "generate", `{"modelId":"local-sketch","prompt":"from the shell"}`}, &out, io.Discard)
	if err != nil {
		t.Fatalf("client call: %v\n%s", err, out.String())
	}
	var res struct {
		StructuredContent struct {
			Status  string `json:"status"`
			Outputs []any  `json:"outputs"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.StructuredContent.Status != "completed" || len(res.StructuredContent.Outputs) != 1 {
		t.Fatalf("client call printed %s (%v)", out.String(), err)
	}
	out.Reset()
	if err := runClient(context.Background(), []string{"--endpoint", s.url + "/mcp", "--state", state, "call", "generate", `{"prompt":"x","modelId":"local-sketch","aspectRatio":"7:3"}`}, &out, io.Discard); err == nil {
		t.Fatalf("a tool error should fail the command: %s", out.String())
	}
	if err := runClient(context.Background(), []string{"--endpoint", s.url + "/mcp", "--state", state, "call", "generate", `{not json`}, &out, io.Discard); err == nil {
		t.Fatal("bad JSON arguments accepted")
	}
}

// TestClientProgressAndInterrupt runs `darkroom client call` as a real
// process: it prints each change of the task to stderr, and on SIGINT
// stops, exits non-zero and prints the exact command that resumes the
// task; that command then finishes it.
func TestClientProgressAndInterrupt(t *testing.T) {
	s := startServer(t, 0.2) // a 2 s video takes a few seconds
	state := filepath.Join(t.TempDir(), "client.db")
	cmd := exec.Command(binary, "client", "--endpoint", s.url+"/mcp", "--state", state,
		"call", "generate", `{"modelId":"local-motion","prompt":"interrupted","durationSeconds":2}`)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "working") {
			break // the task exists and is being waited for
		}
	}
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "task ") {
		t.Fatalf("no progress before the interrupt: %q", lines)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("interrupted client exited %v, want non-zero; stderr %q", err, lines)
	}
	t.Logf("stderr of the interrupted client:\n%s", strings.Join(lines, "\n"))
	taskID := strings.Fields(lines[0])[1]
	want := "darkroom client --endpoint " + s.url + "/mcp --state " + state + " resume " + taskID
	var resume string
	for _, l := range lines {
		if strings.TrimSpace(l) == want {
			resume = strings.TrimSpace(l)
		}
	}
	if resume == "" {
		t.Fatalf("stderr does not give %q:\n%s", want, strings.Join(lines, "\n"))
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout after the interrupt: %s", stdout.String())
	}

	// The printed command, run as is, waits the task out.
	args := strings.Fields(resume)[1:]
	rc := exec.Command(binary, args...)
	var rerr bytes.Buffer
	rc.Stderr = &rerr
	out, err := rc.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", resume, err, rerr.String())
	}
	t.Logf("stderr of the resume:\n%s", rerr.String())
	if !strings.Contains(rerr.String(), " completed") || !strings.Contains(rerr.String(), "Done: 1 video (") {
		t.Errorf("resume's stderr lacks the end and the result's line:\n%s", rerr.String())
	}
	var res struct {
		StructuredContent struct {
			Status string `json:"status"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.StructuredContent.Status != "completed" {
		t.Fatalf("resume printed %s (%v)", out, err)
	}
	// One line per change: no line repeats the one before it.
	for i := 2; i < len(lines); i++ {
		if a, b := strings.Fields(lines[i-1]), strings.Fields(lines[i]); len(a) > 1 && len(b) > 1 && strings.Join(a[1:], " ") == strings.Join(b[1:], " ") {
			t.Errorf("repeated progress line %q", lines[i])
		}
	}
}

// TestClientResumeNothingPending: `darkroom client resume` with no task
// left pending says so on stderr and exits non-zero, without a server.
func TestClientResumeNothingPending(t *testing.T) {
	state := filepath.Join(t.TempDir(), "client.db")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"client", "--endpoint", "http://127.0.0.1:1/mcp", "--state", state, "resume"}, &out, &errOut)
	if code == 0 || out.Len() != 0 || !strings.Contains(errOut.String(), "nothing to resume: no pending task in "+state) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want non-zero and a line saying nothing is pending", code, out.String(), errOut.String())
	}
}

// TestClientStopsOnUpload: a task that waits for an upload_input is not
// waited for, by call, resume TASK-ID or resume: each prints the task's
// status message (which names the generationId and the role) and how to
// resume, and exits non-zero. (Without the stop each would wait until
// the guard's deadline.)
func TestClientStopsOnUpload(t *testing.T) {
	s := startServer(t, 0)
	state := filepath.Join(t.TempDir(), "client.db")
	var buf bytes.Buffer
	_ = png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 64, 64)))
	args, _ := json.Marshal(map[string]any{"modelId": "local-edit", "prompt": "erase the boat", "inputs": []any{
		map[string]any{"role": "image", "image": map[string]any{"data": base64.StdEncoding.EncodeToString(buf.Bytes()), "mimeType": "image/png"}},
		map[string]any{"role": "mask"}}})
	base := []string{"client", "--endpoint", s.url + "/mcp", "--state", state}
	taskID := ""
	for _, sub := range [][]string{{"call", "generate", string(args)}, {"resume", "TASK"}, {"resume"}} {
		t.Run(sub[0]+fmt.Sprint(len(sub)), func(t *testing.T) {
			if len(sub) == 2 && sub[1] == "TASK" {
				sub = []string{"resume", taskID}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a guard, not a wait
			defer cancel()
			var out, errOut bytes.Buffer
			code := run(ctx, append(slices.Clone(base), sub...), &out, &errOut)
			stderr := errOut.String()
			if code == 0 || out.Len() != 0 || !strings.Contains(stderr, "Waiting for an upload: call upload_input with generationId ") ||
				!strings.Contains(stderr, "and role mask") || !strings.Contains(stderr, " resume ") || strings.Contains(stderr, "Stopped waiting") {
				t.Fatalf("%v: exit %d, stdout %q, stderr:\n%s", sub, code, out.String(), stderr)
			}
			if taskID == "" {
				taskID = strings.Fields(stderr)[1] // "task ID (Ctrl-C …)"
			}
		})
	}
}
