//lint:file-ignore SA1019 the conformance fixtures exercise the deprecated roots, sampling and logging features.

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// registerCore registers the fixtures of the core (non-tasks) scenarios of
// the conformance suite at the 2026-07-28 wire: the test_* tools, the
// test:// resources and template, and the test_* prompts. Completion is
// served by completeFixture, which newHandler passes as the server's
// CompletionHandler.
//
// Scenarios that exist only on the legacy (initialize) wire and need
// server-to-client requests (sampling, elicitation, logging/setLevel,
// resources/subscribe, SSE reconnection) have no fixtures here: the
// 2026-07-28 server never sends requests.
func registerCore(s *mcp.Server) {
	registerCoreTools(s)
	registerMRTRTools(s)
	registerCoreResources(s)
	registerCorePrompts(s)
}

// noArgs is the input schema of a tool without arguments.
var noArgs = json.RawMessage(`{"type":"object","additionalProperties":false}`)

// textResult is a successful tool result holding one text block.
func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// missingCapability is the -32021 error for a request that needed the
// client capability name (e.g. "sampling") without declaring it.
func missingCapability(name string) error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{name: map[string]any{}}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
		Message: "missing required client capability: " + name, Data: data}
}

// declared reports whether caps declares the in-band input kind name:
// "elicitation" (form mode, which the fixtures use), "sampling" or "roots".
func declared(caps *mcp.ClientCapabilities, name string) bool {
	if caps == nil {
		return false
	}
	switch name {
	case "elicitation":
		e := caps.Elicitation
		return e != nil && (e.Form != nil || e.URL == nil) // {} means form mode only
	case "sampling":
		return caps.Sampling != nil
	case "roots":
		return caps.RootsV2 != nil
	}
	return false
}

// completionWords are the candidate values of completeFixture, keyed by
// the reference (prompt name or template URI) and the argument name.
var completionWords = map[string][]string{
	"test_prompt_with_arguments#arg1":                {"test", "testValue1", "tested", "other"},
	"test_prompt_with_arguments#arg2":                {"test", "testValue2", "tested", "other"},
	"test://template/{id}/data#id":                   {"123", "124", "456"},
	"test_prompt_with_embedded_resource#resourceUri": {"test://static-text", "test://static-binary"},
}

// completeFixture answers completion/complete with the candidates that
// start with the typed prefix.
func completeFixture(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ref := req.Params.Ref.Name
	if req.Params.Ref.Type == "ref/resource" {
		ref = req.Params.Ref.URI
	}
	values := []string{}
	for _, w := range completionWords[ref+"#"+req.Params.Argument.Name] {
		if strings.HasPrefix(w, req.Params.Argument.Value) {
			values = append(values, w)
		}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}

// pngPixel is a 1x1 red PNG.
var pngPixel = func() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

// wavSilence is a short mono 8 kHz 16-bit PCM WAV of silence.
var wavSilence = func() []byte {
	const rate, samples = 8000, 8
	data := make([]byte, 2*samples)
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(36 + len(data)))
	b.WriteString("WAVEfmt ")
	w(uint32(16))       // fmt chunk size
	w(uint16(1))        // PCM
	w(uint16(1))        // mono
	w(uint32(rate))     // sample rate
	w(uint32(rate * 2)) // byte rate
	w(uint16(2))        // block align
	w(uint16(16))       // bits per sample
	b.WriteString("data")
	w(uint32(len(data)))
	b.Write(data)
	return b.Bytes()
}()

// sortedKeys lists a map's keys in order, for stable messages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
