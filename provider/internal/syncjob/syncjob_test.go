package syncjob

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

func TestScanner(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n" + strings.Repeat("pixels", 5000))
	b64 := base64.StdEncoding.EncodeToString(png)
	cases := []struct {
		name  string
		reply string
		want  int               // streamed values
		small map[string]string // first captured value per key
	}{
		{"openai", `{"created":1,"data":[{"b64_json":"` + b64 + `","revised_prompt":"a \"cat\""},{"b64_json":"` + b64 + `"}]}`, 2, map[string]string{"revised_prompt": `a "cat"`}},
		{"escaped slashes", `{"data":[{"b64_json":"` + strings.ReplaceAll(b64, "/", `\/`) + `"}]}`, 1, nil},
		{"gemini", `{"candidates":[{"content":{"parts":[{"text":"here \"data\": it is"},{"inlineData":{"mimeType":"image/png","data":"` + b64 + `"}}]},"finishReason":"STOP"}]}`, 1, map[string]string{"finishReason": "STOP", "text": `here "data": it is`}},
		{"refusal", `{"candidates":[{"finishReason":"IMAGE_SAFETY","finishMessage":"blocked"}]}`, 0, map[string]string{"finishReason": "IMAGE_SAFETY"}},
		{"literals and a list", `{"done": true,"response":{"raiMediaFilteredCount":2, "raiMediaFilteredReasons": [ "a \"b\"" , "c"],"text":"ok"}}`, 0,
			map[string]string{"done": "true", "raiMediaFilteredCount": "2", "raiMediaFilteredReasons": `a "b"`, "text": "ok"}},
		{"an object under a captured key", `{"text":{"text":"inner"},"bytesBase64Encoded":"` + b64 + `"}`, 1, map[string]string{"text": "inner"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// One byte at a time: values cross every buffer boundary.
			sc := NewScanner(iotest.OneByteReader(strings.NewReader(c.reply)), []string{"b64_json", "data", "bytesBase64Encoded"}, []string{"revised_prompt", "finishReason", "text", "done", "raiMediaFilteredCount", "raiMediaFilteredReasons"})
			n := 0
			for {
				_, v, err := sc.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(base64.NewDecoder(base64.StdEncoding, v))
				if err != nil || !bytes.Equal(got, png) {
					t.Fatalf("value %d: %d bytes, err %v", n, len(got), err)
				}
				n++
			}
			if n != c.want {
				t.Fatalf("%d values, want %d", n, c.want)
			}
			for k, v := range c.small {
				if len(sc.Small[k]) == 0 || sc.Small[k][0] != v {
					t.Errorf("Small[%s] = %q, want %q", k, sc.Small[k], v)
				}
			}
		})
	}
}

func TestJournalFind(t *testing.T) {
	ctx := context.Background()
	j := Journal{Spool: provider.DirSpool(t.TempDir()), Provider: "openai"}
	steps := []struct {
		do      func() error
		wantOK  bool
		wantErr error
	}{
		{func() error { return nil }, false, nil},                                                    // nothing began
		{func() error { _, err := j.Begin(ctx, "g1"); return err }, false, provider.ErrResubmitOnce}, // cut off once
		{func() error { _, err := j.Begin(ctx, "g1"); return err }, false, provider.ErrUnsupported},  // cut off twice
		{func() error { return j.Done(ctx, "g1", 2, provider.Job{ID: "x"}) }, true, nil},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		job, ok, err := j.Find(ctx, "g1")
		if ok != s.wantOK || !errors.Is(err, s.wantErr) || (err == nil && s.wantErr != nil) || (ok && job.ID != "x") {
			t.Fatalf("step %d: Find = %v %v %v", i, job, ok, err)
		}
	}
	n, _ := j.Begin(ctx, "g2")
	j.Undo(ctx, "g2", n)
	if _, ok, err := j.Find(ctx, "g2"); ok || err != nil {
		t.Fatalf("after Undo: %v %v", ok, err)
	}
	// A long paid job's call, cut off once, is never made again; an
	// undone one (surely nothing made) may be.
	n, _ = j.BeginOnce(ctx, "g3")
	if _, ok, err := j.Find(ctx, "g3"); ok || !errors.Is(err, provider.ErrUnsupported) {
		t.Fatalf("BeginOnce cut off once: %v %v; want ErrUnsupported", ok, err)
	}
	j.Undo(ctx, "g3", n)
	if _, ok, err := j.Find(ctx, "g3"); ok || err != nil {
		t.Fatalf("BeginOnce undone: %v %v", ok, err)
	}
}

func TestStoreAndOpen(t *testing.T) {
	ctx := context.Background()
	j := Journal{Spool: provider.DirSpool(t.TempDir()), Provider: "google"}
	png := append(tinyPNG(t), strings.Repeat("x", 100)...)
	reply := `{"predictions":[{"mimeType":"image/png","bytesBase64Encoded":"` + base64.StdEncoding.EncodeToString(png) + `"}]}`
	outs, err := j.Store(ctx, "g", 1, NewScanner(strings.NewReader(reply), []string{"bytesBase64Encoded"}, nil), 0)
	if err != nil || len(outs) != 1 || outs[0].MimeType != "image/png" {
		t.Fatalf("Store = %v, %v", outs, err)
	}
	rc, err := j.Open(ctx, outs[0])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(b, png) {
		t.Fatalf("read back %d bytes", len(b))
	}
	if _, err := j.Open(ctx, outs[0]); err == nil {
		t.Fatal("a copied output is still spooled")
	}
	if _, err := j.Open(ctx, provider.Output{URL: "spool:spool/openai/g/out-1-0"}); err == nil {
		t.Fatal("opened another provider's spool")
	}
}

// TestStoreVideo: an inline video is spooled as video/mp4 within the
// video bound; bytes without an MP4 header are refused and nothing kept.
func TestStoreVideo(t *testing.T) {
	ctx := context.Background()
	mp4 := append([]byte("\x00\x00\x00\x18ftypmp42"), strings.Repeat("v", 1000)...)
	cases := []struct {
		name    string
		file    []byte
		wantErr string
	}{
		{"mp4", mp4, ""},
		{"a png", tinyPNG(t), "that is not video"},
		{"too short", []byte("ftyp"), "that is not video"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			j := Journal{Spool: provider.DirSpool(dir), Provider: "google"}
			reply := `{"name":"op","done":true,"response":{"videos":[{"bytesBase64Encoded":"` + base64.StdEncoding.EncodeToString(c.file) + `","mimeType":"video/mp4"}]}}`
			outs, err := j.StoreVideo(ctx, "g", 0, NewScanner(strings.NewReader(reply), []string{"bytesBase64Encoded"}, nil), 1)
			if c.wantErr != "" {
				var perm *provider.PermanentError
				if !errors.As(err, &perm) || !strings.Contains(perm.Message, c.wantErr) || len(outs) != 0 {
					t.Fatalf("StoreVideo = %v, %v; want a refusal saying %q", outs, err, c.wantErr)
				}
				return
			}
			if err != nil || len(outs) != 1 || outs[0].MimeType != "video/mp4" {
				t.Fatalf("StoreVideo = %v, %v", outs, err)
			}
			rc, err := j.Open(ctx, outs[0])
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(b, c.file) {
				t.Fatalf("read back %d bytes", len(b))
			}
		})
	}
}

func TestGate(t *testing.T) {
	g := NewGate(2, time.Second)
	a, err1 := g.Enter("x")
	_, err2 := g.Enter("x")
	_, err3 := g.Enter("x")
	var re *provider.RetryableError
	if err1 != nil || err2 != nil || !errors.As(err3, &re) || re.After != time.Second || !errors.Is(err3, provider.ErrNotCreated) || !errors.Is(err3, provider.ErrAtCapacity) {
		t.Fatalf("enter: %v %v %v", err1, err2, err3)
	}
	a()
	if _, err := g.Enter("x"); err != nil {
		t.Fatalf("a freed slot: %v", err)
	}
}
