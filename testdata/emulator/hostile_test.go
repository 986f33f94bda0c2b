package emulator

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestHostileShapes: the hostile tokens give what they say, in each
// vendor's reply shape: [many:N] N images, [zeros:N] N bytes of zeros,
// [endless] a stream that goes on until the client hangs up.
func TestHostileShapes(t *testing.T) {
	em := New(Options{})
	defer em.Close()
	post := func(url, key, val, body string) *http.Response {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set(key, val)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	openai := func(prompt string) *http.Response {
		return post(em.OpenAI.URL+"/v1/images/generations", "Authorization", "Bearer sk-test", `{"prompt":"`+prompt+`","n":1}`)
	}
	gemini := func(prompt string) *http.Response {
		return post(em.Google.URL+"/v1beta/models/gemini-3.1-flash-image:generateContent", "X-Goog-Api-Key", "gemini_test", `{"contents":[{"parts":[{"text":"`+prompt+`"}]}]}`)
	}
	var reply struct {
		Data []struct {
			B64 string `json:"b64_json"`
		} `json:"data"`
		Candidates []struct {
			Content struct {
				Parts []struct {
					Inline *struct{ Data string } `json:"inlineData"`
				}
			}
		}
	}
	for name, call := range map[string]func(string) *http.Response{"openai": openai, "gemini": gemini} {
		resp := call("a [many:30]")
		err := json.NewDecoder(resp.Body).Decode(&reply)
		resp.Body.Close()
		n := len(reply.Data)
		if len(reply.Candidates) > 0 {
			n = len(reply.Candidates[0].Content.Parts) - 1 // the text part
		}
		if err != nil || n != 30 {
			t.Errorf("%s [many:30]: %d images, %v", name, n, err)
		}
		reply.Data, reply.Candidates = nil, nil

		resp = call("a [zeros:100000]")
		err = json.NewDecoder(resp.Body).Decode(&reply)
		resp.Body.Close()
		b64 := ""
		switch {
		case len(reply.Data) > 0:
			b64 = reply.Data[0].B64
		case len(reply.Candidates) > 0:
			b64 = reply.Candidates[0].Content.Parts[1].Inline.Data
		}
		if b, _ := base64.StdEncoding.DecodeString(b64); err != nil || len(b) != 100000 || strings.Trim(string(b), "\x00") != "" {
			t.Errorf("%s [zeros:100000]: %d bytes, %v", name, len(b), err)
		}
		reply.Data, reply.Candidates = nil, nil

		resp = call("a [endless]")
		got, _ := io.CopyN(io.Discard, resp.Body, 8<<20)
		resp.Body.Close() // the emulator stops writing
		if got != 8<<20 {
			t.Errorf("%s [endless]: ended after %d bytes", name, got)
		}
	}
}
