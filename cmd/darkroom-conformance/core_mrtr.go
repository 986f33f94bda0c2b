//lint:file-ignore SA1019 the conformance fixtures exercise the deprecated roots, sampling and logging features.

package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MRTR (SEP-2322) fixtures answer tools/call and prompts/get with an
// InputRequiredResult until the retry carries the answers they asked for.
// Any requestState they hand out is sealed with an HMAC bound to the tool
// and an expiry, so a forged or altered state is rejected with -32602.

func registerMRTRTools(s *mcp.Server) {
	addTools(s, []fixtureTool{
		{name: "test_input_required_result_elicitation", description: "Asks for the caller's name by in-band elicitation, then greets them.",
			handler: askName("test_input_required_result_elicitation")},
		{name: "test_input_required_result_sampling", description: "Asks the client's model a question by in-band sampling.",
			handler: askModel},
		{name: "test_input_required_result_list_roots", description: "Asks for the client's roots in-band.",
			handler: askRoots},
		{name: "test_input_required_result_request_state", description: "Asks for confirmation and round-trips a sealed requestState.",
			handler: confirmWithState("test_input_required_result_request_state")},
		{name: "test_input_required_result_tampered_state", description: "Asks for confirmation; rejects a requestState that fails verification.",
			handler: confirmWithState("test_input_required_result_tampered_state")},
		{name: "test_input_required_result_multiple_inputs", description: "Asks for elicitation, sampling and roots input in one round.",
			handler: askAll},
		{name: "test_input_required_result_multi_round", description: "Asks for a name, then a colour, carrying progress in requestState.",
			handler: multiRound},
		{name: "test_input_required_result_capabilities", description: "Asks only for the input kinds the request's client capabilities declare.",
			handler: askDeclared},
	})
}

// stateKey signs requestState for the life of the process.
var stateKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

const stateTTL = 10 * time.Minute

func stateMAC(payload string) []byte {
	m := hmac.New(sha256.New, stateKey)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// sealState wraps value in a requestState only scope can open.
func sealState(scope, value string) string {
	payload := scope + "\n" + strconv.FormatInt(time.Now().Add(stateTTL).Unix(), 10) + "\n" + value
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(stateMAC(payload))
}

// openState verifies a requestState sealed for scope and returns its value.
func openState(scope, state string) (string, error) {
	bad := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState failed verification"}
	p64, s64, ok := strings.Cut(state, ".")
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p64)
	sig, err2 := enc.DecodeString(s64)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(sig, stateMAC(string(payload))) {
		return "", bad
	}
	gotScope, rest, _ := strings.Cut(string(payload), "\n")
	expiry, value, ok := strings.Cut(rest, "\n")
	exp, err := strconv.ParseInt(expiry, 10, 64)
	if !ok || gotScope != scope || err != nil || time.Now().Unix() > exp {
		return "", bad
	}
	return value, nil
}

// inputRequired is a tool result asking for input.
func inputRequired(reqs mcp.InputRequestMap, state string) *mcp.CallToolResult {
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: state}
}

// form is a form-mode elicitation of flat properties (name → JSON type),
// all required.
func form(message string, props ...string) *mcp.ElicitParams {
	properties := map[string]any{}
	required := []string{}
	for i := 0; i+1 < len(props); i += 2 {
		properties[props[i]] = map[string]any{"type": props[i+1]}
		required = append(required, props[i])
	}
	return &mcp.ElicitParams{Mode: "form", Message: message,
		RequestedSchema: map[string]any{"type": "object", "properties": properties, "required": required}}
}

func question(text string) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{MaxTokens: 100,
		Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}
}

// elicited returns the answer to elicitation key: its action and, when
// accepted, its content.
func elicited(r mcp.InputResponseMap, key string) (action string, content map[string]any) {
	e, ok := r[key].(*mcp.ElicitResult)
	if !ok || e == nil {
		return "", nil
	}
	if e.Action != "accept" {
		return e.Action, nil
	}
	return e.Action, e.Content
}

// sampled returns the text of the answer to sampling request key.
func sampled(r mcp.InputResponseMap, key string) (string, bool) {
	m, ok := r[key].(*mcp.CreateMessageWithToolsResult)
	if !ok || m == nil {
		return "", false
	}
	for _, c := range m.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text, true
		}
	}
	return "(no text)", true
}

// roots returns the answer to roots/list request key.
func roots(r mcp.InputResponseMap, key string) ([]string, bool) {
	l, ok := r[key].(*mcp.ListRootsResult)
	if !ok || l == nil {
		return nil, false
	}
	uris := []string{}
	for _, root := range l.Roots {
		uris = append(uris, root.URI)
	}
	return uris, true
}

// require fails with -32021 unless the request declared every kind.
func require(req *mcp.CallToolRequest, kinds ...string) error {
	for _, k := range kinds {
		if !declared(req.ClientCapabilities(), k) {
			return missingCapability(k)
		}
	}
	return nil
}

// askName asks for user_name and greets the caller; a declined or
// cancelled answer completes without a name, a missing one is asked again.
func askName(tool string) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := require(req, "elicitation"); err != nil {
			return nil, err
		}
		action, content := elicited(req.Params.InputResponses, "user_name")
		if name, _ := content["name"].(string); name != "" {
			return textResult(fmt.Sprintf("Hello, %s!", name)), nil
		}
		if action == "decline" || action == "cancel" {
			return textResult(tool + ": no name given (" + action + ")"), nil
		}
		return inputRequired(mcp.InputRequestMap{"user_name": form("What is your name?", "name", "string")}, ""), nil
	}
}

func askModel(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := require(req, "sampling"); err != nil {
		return nil, err
	}
	if answer, ok := sampled(req.Params.InputResponses, "capital_question"); ok {
		return textResult("The model answered: " + answer), nil
	}
	return inputRequired(mcp.InputRequestMap{"capital_question": question("What is the capital of France?")}, ""), nil
}

func askRoots(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := require(req, "roots"); err != nil {
		return nil, err
	}
	if uris, ok := roots(req.Params.InputResponses, "client_roots"); ok {
		return textResult(fmt.Sprintf("%d root(s): %s", len(uris), strings.Join(uris, ", "))), nil
	}
	return inputRequired(mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}, ""), nil
}

// confirmWithState asks for confirmation and completes only on a retry
// that echoes the sealed state it handed out.
func confirmWithState(tool string) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := require(req, "elicitation"); err != nil {
			return nil, err
		}
		if req.Params.RequestState != "" {
			if _, err := openState(tool, req.Params.RequestState); err != nil {
				return nil, err
			}
			if action, content := elicited(req.Params.InputResponses, "confirm"); action != "" {
				return textResult(fmt.Sprintf("requestState verified; confirmation %s %v", action, content)), nil
			}
		}
		return inputRequired(mcp.InputRequestMap{"confirm": form("Please confirm.", "ok", "boolean")},
			sealState(tool, "awaiting-confirm")), nil
	}
}

// askAll asks for all three input kinds at once and completes when every
// one is answered, asking again only for those still missing.
func askAll(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	const tool = "test_input_required_result_multiple_inputs"
	if err := require(req, "elicitation", "sampling", "roots"); err != nil {
		return nil, err
	}
	if req.Params.RequestState != "" {
		if _, err := openState(tool, req.Params.RequestState); err != nil {
			return nil, err
		}
	}
	r := req.Params.InputResponses
	_, content := elicited(r, "user_name")
	name, _ := content["name"].(string)
	greeting, haveGreeting := sampled(r, "greeting")
	uris, haveRoots := roots(r, "client_roots")
	if name != "" && haveGreeting && haveRoots {
		return textResult(fmt.Sprintf("%s %s (%d root(s))", greeting, name, len(uris))), nil
	}
	missing := mcp.InputRequestMap{}
	if name == "" {
		missing["user_name"] = form("What is your name?", "name", "string")
	}
	if !haveGreeting {
		missing["greeting"] = question("Write a one-line greeting.")
	}
	if !haveRoots {
		missing["client_roots"] = &mcp.ListRootsParams{}
	}
	return inputRequired(missing, sealState(tool, "multiple")), nil
}

// multiRound asks for a name, then a colour; the name travels in the
// sealed state between rounds.
func multiRound(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	const tool = "test_input_required_result_multi_round"
	if err := require(req, "elicitation"); err != nil {
		return nil, err
	}
	askName := func() (*mcp.CallToolResult, error) {
		return inputRequired(mcp.InputRequestMap{"step1_name": form("Step 1: what is your name?", "name", "string")},
			sealState(tool, "round1")), nil
	}
	if req.Params.RequestState == "" {
		return askName()
	}
	state, err := openState(tool, req.Params.RequestState)
	if err != nil {
		return nil, err
	}
	r := req.Params.InputResponses
	if state == "round1" {
		_, content := elicited(r, "step1_name")
		name, _ := content["name"].(string)
		if name == "" {
			return askName()
		}
		return inputRequired(mcp.InputRequestMap{"step2_color": form("Step 2: what is your favourite colour?", "color", "string")},
			sealState(tool, "round2:"+name)), nil
	}
	name, ok := strings.CutPrefix(state, "round2:")
	if !ok {
		return askName()
	}
	_, content := elicited(r, "step2_color")
	color, _ := content["color"].(string)
	if color == "" {
		return inputRequired(mcp.InputRequestMap{"step2_color": form("Step 2: what is your favourite colour?", "color", "string")},
			req.Params.RequestState), nil
	}
	return textResult(fmt.Sprintf("%s likes %s", name, color)), nil
}

// askDeclared asks for each input kind the request declared, and nothing
// else; with none declared it completes at once.
func askDeclared(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r := req.Params.InputResponses; len(r) > 0 {
		return textResult("answered: " + strings.Join(sortedKeys(r), ", ")), nil
	}
	caps := req.ClientCapabilities()
	reqs := mcp.InputRequestMap{}
	if declared(caps, "elicitation") {
		reqs["user_name"] = form("What is your name?", "name", "string")
	}
	if declared(caps, "sampling") {
		reqs["greeting"] = question("Write a one-line greeting.")
	}
	if declared(caps, "roots") {
		reqs["client_roots"] = &mcp.ListRootsParams{}
	}
	if len(reqs) == 0 {
		return textResult("no input kind declared; nothing to ask"), nil
	}
	return inputRequired(reqs, ""), nil
}

// askContext is the prompts/get analogue of askName: it elicits context
// for the prompt before rendering it.
func askContext(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	caps := req.ClientCapabilities()
	if !declared(caps, "elicitation") {
		return nil, missingCapability("elicitation")
	}
	_, content := elicited(req.Params.InputResponses, "user_context")
	if ctx, _ := content["context"].(string); ctx != "" {
		return &mcp.GetPromptResult{Description: "A prompt with elicited context",
			Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Context: " + ctx}}}}, nil
	}
	return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{
		"user_context": form("What context should the prompt use?", "context", "string")}}, nil
}
