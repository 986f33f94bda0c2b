package emulator

// Vertex AI (https://{location}-aiplatform.googleapis.com), as Google's
// Go SDK (google.golang.org/genai v1.79.1, read 2026-12-07) speaks it in
// its Vertex mode, and as a service account signs in:
//
//   - POST /token (a service account's token_uri): the OAuth 2.0 JWT
//     bearer grant (RFC 7523): grant_type
//     urn:ietf:params:oauth:grant-type:jwt-bearer and an assertion, a JWT
//     signed RS256 with the account's key (iss the account's email, aud
//     the token_uri, a scope, iat, exp at most an hour on) → {"access_token",
//     "token_type": "Bearer", "expires_in"}; every API call then carries
//     "Authorization: Bearer <token>" (401 UNAUTHENTICATED otherwise).
//   - POST /v1/projects/{project}/locations/{location}/publishers/google/
//     models/{model}:predictLongRunning (Veo) with {"instances": [{"prompt",
//     "image", "lastFrame", "referenceImages"}], "parameters": {...}}
//     (models.go generateVideosParametersToVertex) → an operation {"name":
//     ".../models/{model}/operations/{id}"}.
//   - POST .../models/{model}:fetchPredictOperation {"operationName"}
//     (operations.go) → the operation; done, its response carries the
//     videos inline, {"videos": [{"bytesBase64Encoded", "mimeType"}]}
//     (generateVideosResponseFromVertex: videos, raiMediaFilteredCount,
//     raiMediaFilteredReasons), or an "error" {"code", "message"}. There
//     is no cancel (the SDK has none for these operations).
//   - errors are {"error": {"code", "message", "status"}}.
//
// Retired models (retired.go, "vertex") answer 404 NOT_FOUND.

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Default Vertex project and location the emulator serves.
const (
	DefaultVertexProject  = "emu-project"
	DefaultVertexLocation = "us-central1"
	vertexAccount         = "darkroom@emu-project.iam.gserviceaccount.com"
)

var (
	saKeyOnce sync.Once
	saKey     *rsa.PrivateKey
)

// serviceAccountKey is the emulator's service account key, made once a
// process (RSA keys are slow to make).
func serviceAccountKey() *rsa.PrivateKey {
	saKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		saKey = k
	})
	return saKey
}

// ServiceAccountJSON is a service account key file, as Google's console
// downloads it, whose token_uri is the emulator's: what
// GOOGLE_APPLICATION_CREDENTIALS names.
func (e *Emulator) ServiceAccountJSON() []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(serviceAccountKey())
	b, _ := json.MarshalIndent(map[string]string{
		"type": "service_account", "project_id": e.opts.VertexProject, "private_key_id": "emu-key-1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": vertexAccount, "client_id": "100000000000000000001",
		"auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": e.Vertex.URL + "/token",
	}, "", "  ")
	return b
}

func vertexOp(r *http.Request) Op {
	switch p := r.URL.Path; {
	case p == "/token":
		return OpToken
	case strings.HasSuffix(p, ":fetchPredictOperation"):
		return OpStatus
	default:
		return OpCreate
	}
}

var vertexPath = regexp.MustCompile(`^/v1/projects/([^/]+)/locations/([^/]+)/publishers/google/models/([^/:]+):([A-Za-z]+)$`)

func (e *Emulator) vertex(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		e.vertexToken(w, r)
		return
	}
	e.mu.Lock()
	ok := e.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	e.mu.Unlock()
	if !ok {
		writeGoogleError(w, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	}
	m := vertexPath.FindStringSubmatch(r.URL.Path)
	if m == nil || r.Method != http.MethodPost {
		writeGoogleError(w, 404, "NOT_FOUND", "The requested URL was not found on this server.")
		return
	}
	project, location, model, method := m[1], m[2], m[3], m[4]
	switch {
	case project != e.opts.VertexProject || location != e.opts.VertexLocation:
		writeGoogleError(w, 403, "PERMISSION_DENIED", fmt.Sprintf("Permission denied on resource project %s (or it may not exist) in %s.", project, location))
	case Retired("vertex", model) || !isVideo(model):
		writeGoogleError(w, 404, "NOT_FOUND", fmt.Sprintf("Publisher Model `projects/%s/locations/%s/publishers/google/models/%s` not found.", project, location, model))
	case method == "predictLongRunning":
		e.vertexCreate(w, r, model)
	case method == "fetchPredictOperation":
		e.vertexFetch(w, r, model)
	default:
		writeGoogleError(w, 404, "NOT_FOUND", "Method "+method+" not found.")
	}
}

// vertexRequest is a predictLongRunning body (the fields tests look at).
type vertexRequest struct {
	Instances []struct {
		Prompt          string          `json:"prompt"`
		Image           json.RawMessage `json:"image"`
		LastFrame       json.RawMessage `json:"lastFrame"`
		ReferenceImages []any           `json:"referenceImages"`
	} `json:"instances"`
	Parameters map[string]any `json:"parameters"`
}

func (e *Emulator) vertexCreate(w http.ResponseWriter, r *http.Request, model string) {
	var req vertexRequest
	b, _ := io.ReadAll(r.Body)
	if json.Unmarshal(b, &req) != nil || len(req.Instances) != 1 || req.Instances[0].Prompt == "" || strings.Contains(req.Instances[0].Prompt, "[invalid]") {
		writeGoogleError(w, 400, "INVALID_ARGUMENT", "Request contains an invalid argument.")
		return
	}
	in := map[string]any{}
	for k, v := range req.Parameters {
		in[k] = v
	}
	i := req.Instances[0]
	in["prompt"], in["image"], in["lastFrame"], in["referenceImages"] = i.Prompt, len(i.Image) > 0, len(i.LastFrame) > 0, len(i.ReferenceImages)
	e.mu.Lock()
	j := e.newJob("vertex", model, in)
	e.mu.Unlock()
	writeJSON(w, 200, map[string]any{"name": e.vertexOpName(j)})
}

func (e *Emulator) vertexOpName(j *job) string {
	return fmt.Sprintf("projects/%s/locations/%s/publishers/google/models/%s/operations/%s", e.opts.VertexProject, e.opts.VertexLocation, j.model, j.id)
}

func (e *Emulator) vertexFetch(w http.ResponseWriter, r *http.Request, model string) {
	var req struct {
		OperationName string `json:"operationName"`
	}
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &req)
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[req.OperationName[strings.LastIndex(req.OperationName, "/")+1:]]
	if j == nil || j.prov != "vertex" || j.model != model || req.OperationName != e.vertexOpName(j) {
		writeGoogleError(w, 404, "NOT_FOUND", "Operation not found: "+req.OperationName)
		return
	}
	op := map[string]any{"name": req.OperationName}
	switch ph, _ := j.phaseProgress(e.clock.Now()); ph {
	case "queued", "running":
	case "failed":
		op["done"], op["error"] = true, map[string]any{"code": 13, "message": "Video generation failed: " + j.fail}
	default:
		resp := map[string]any{"@type": "type.googleapis.com/cloud.ai.large_models.vision.GenerateVideoResponse"}
		if j.nsfw {
			resp["raiMediaFilteredCount"] = 1
			resp["raiMediaFilteredReasons"] = []string{"Your prompt was blocked by our safety filters. Try rephrasing it."}
		} else {
			resp["videos"] = []any{map[string]any{"bytesBase64Encoded": base64.StdEncoding.EncodeToString(mp4Bytes), "mimeType": "video/mp4"}}
		}
		op["done"], op["response"] = true, resp
	}
	writeJSON(w, 200, op)
}

// vertexToken is the OAuth 2.0 token endpoint: it checks the JWT bearer
// assertion's signature and claims, and issues an access token.
func (e *Emulator) vertexToken(w http.ResponseWriter, r *http.Request) {
	refuse := func(desc string) {
		writeJSON(w, 400, map[string]any{"error": "invalid_grant", "error_description": desc})
	}
	if r.ParseForm() != nil || r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		writeJSON(w, 400, map[string]any{"error": "unsupported_grant_type", "error_description": "Invalid grant_type"})
		return
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		refuse("Invalid JWT: not three parts")
		return
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err != nil || rsa.VerifyPKCS1v15(&serviceAccountKey().PublicKey, crypto.SHA256, digest[:], sig) != nil {
		refuse("Invalid JWT Signature.")
		return
	}
	var claims struct {
		Iss, Scope, Aud string
		Iat, Exp        int64
	}
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	now := time.Now().Unix() // the signer's clock is real time
	switch {
	case json.Unmarshal(body, &claims) != nil:
		refuse("Invalid JWT: claims")
	case claims.Iss != vertexAccount || claims.Aud != e.Vertex.URL+"/token":
		refuse("Invalid JWT: iss or aud")
	case !strings.Contains(claims.Scope, "https://www.googleapis.com/auth/cloud-platform"):
		refuse("Invalid JWT: the cloud-platform scope is required")
	case claims.Exp <= now || claims.Exp-claims.Iat > 3600 || claims.Iat > now+300:
		refuse("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
	default:
		e.mu.Lock()
		e.seq++
		token := fmt.Sprintf("ya29.emu-%d", e.seq)
		e.tokens[token] = true
		e.mu.Unlock()
		writeJSON(w, 200, map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3599})
	}
}
