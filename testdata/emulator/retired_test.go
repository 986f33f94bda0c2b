package emulator

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"slices"
	"testing"
)

// TestOpenAIRetiredModels: every retired OpenAI image model is refused on
// generations and edits exactly as OpenAI answers (404 model_not_found,
// param null), and makes no job; the current model is served.
func TestOpenAIRetiredModels(t *testing.T) {
	em := New(Options{})
	defer em.Close()
	post := func(path, model string) *http.Response {
		var body bytes.Buffer
		ctype := "application/json"
		if path == "/v1/images/edits" {
			mw := multipart.NewWriter(&body)
			mw.WriteField("model", model)
			mw.WriteField("prompt", "add a moon")
			fw, _ := mw.CreateFormFile("image", "image.png")
			fw.Write(PNG())
			mw.Close()
			ctype = mw.FormDataContentType()
		} else {
			json.NewEncoder(&body).Encode(map[string]any{"model": model, "prompt": "a kite"})
		}
		req, _ := http.NewRequest("POST", em.OpenAI.URL+path, &body)
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	models := []string{"gpt-image-1", "gpt-image-1-mini", "gpt-image-1.5", "chatgpt-image-latest", "dall-e-2", "dall-e-3", "gpt-image-2"}
	for _, path := range []string{"/v1/images/generations", "/v1/images/edits"} {
		for _, model := range models {
			t.Run(path+"/"+model, func(t *testing.T) {
				jobs := em.Jobs("openai")
				resp := post(path, model)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !Retired("openai", model) {
					if resp.StatusCode != 200 || em.Jobs("openai") != jobs+1 {
						t.Fatalf("current model: %d %s", resp.StatusCode, b)
					}
					return
				}
				var e struct {
					Error map[string]any `json:"error"`
				}
				json.Unmarshal(b, &e)
				want := map[string]any{"message": "The model `" + model + "` has been deprecated, learn more here: https://platform.openai.com/docs/deprecations",
					"type": "invalid_request_error", "param": nil, "code": "model_not_found"}
				if resp.StatusCode != 404 || len(e.Error) != len(want) {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
				for k, v := range want {
					if e.Error[k] != v {
						t.Fatalf("error.%s = %v, want %v", k, e.Error[k], v)
					}
				}
				if em.Jobs("openai") != jobs {
					t.Fatal("a refused model made a job")
				}
			})
		}
	}
	if !slices.Equal([]bool{Retired("openai", "gpt-image-2"), Retired("google", "gpt-image-1")}, []bool{false, false}) {
		t.Fatal("Retired names a served model")
	}
}

// TestGoogleRetiredModels: every retired Gemini API model is refused
// with 404 NOT_FOUND on generateContent and on the Interactions API, and
// makes no job; the current models are served.
func TestGoogleRetiredModels(t *testing.T) {
	em := New(Options{})
	defer em.Close()
	post := func(path, body string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", em.Google.URL+path, bytes.NewBufferString(body))
		req.Header.Set("X-Goog-Api-Key", "gemini_test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error map[string]any `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error
	}
	models := append(slices.Sorted(maps.Keys(retiredGoogle)), "gemini-3.1-flash-image", "gemini-omni-1.2-flash")
	for _, model := range models {
		t.Run(model, func(t *testing.T) {
			jobs := em.Jobs("google")
			var status int
			var e map[string]any
			if isVideo(model) {
				status, e = post("/v1beta/interactions", `{"model":"`+model+`","background":true,"input":"a fox"}`)
			} else {
				status, e = post("/v1beta/models/"+model+":generateContent", `{"contents":[{"parts":[{"text":"a fox"}]}]}`)
			}
			if !Retired("google", model) {
				if status != 200 || em.Jobs("google") != jobs+1 {
					t.Fatalf("current model: %d %v", status, e)
				}
				return
			}
			code := e["status"]
			if isVideo(model) {
				code = e["code"] // interactions.Error: a string code
			}
			if status != 404 || code != "NOT_FOUND" || em.Jobs("google") != jobs {
				t.Fatalf("retired model: %d %v, %d jobs made", status, e, em.Jobs("google")-jobs)
			}
		})
	}
}
