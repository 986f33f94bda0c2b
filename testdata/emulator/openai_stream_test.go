package emulator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestOpenAIStream: a GPT image model's call with stream answers
// server-sent events, the partial images asked for then the completed
// image (the edit's event names for an edit); stream for another model,
// and partial_images outside 0–3, are refused with 400 invalid_value.
func TestOpenAIStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		events []string
	}{
		{"three partial images", map[string]any{"model": "gpt-image-2", "prompt": "a kite", "stream": true, "partial_images": 3}, 200,
			[]string{"image_generation.partial_image", "image_generation.partial_image", "image_generation.partial_image", "image_generation.completed"}},
		{"no partial images", map[string]any{"model": "gpt-image-2", "prompt": "a kite", "stream": true, "partial_images": 0}, 200,
			[]string{"image_generation.completed"}},
		{"not streamed", map[string]any{"model": "gpt-image-2", "prompt": "a kite"}, 200, nil},
		{"a model that does not stream (a gateway's)", map[string]any{"model": "flux-gateway", "prompt": "a kite", "stream": true}, 400, nil},
		{"four partial images", map[string]any{"model": "gpt-image-2", "prompt": "a kite", "stream": true, "partial_images": 4}, 400, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			em := New(Options{})
			defer em.Close()
			b, _ := json.Marshal(tc.body)
			req, _ := http.NewRequest(http.MethodPost, em.OpenAI.URL+"/v1/images/generations", bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer "+em.opts.OpenAIKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			streamed := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
			if streamed != (tc.events != nil) {
				t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
			var events []string
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if typ, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
					events = append(events, typ)
				}
			}
			if strings.Join(events, ",") != strings.Join(tc.events, ",") {
				t.Fatalf("events %v, want %v", events, tc.events)
			}
		})
	}
}
