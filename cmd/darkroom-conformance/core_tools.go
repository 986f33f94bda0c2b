//lint:file-ignore SA1019 the conformance fixtures exercise the deprecated roots, sampling and logging features.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixtureTool is one tool registration: a nil schema means no arguments.
type fixtureTool struct {
	name, description string
	schema            json.RawMessage
	handler           mcp.ToolHandler
}

func addTools(s *mcp.Server, tools []fixtureTool) {
	for _, t := range tools {
		schema := t.schema
		if schema == nil {
			schema = noArgs
		}
		s.AddTool(&mcp.Tool{Name: t.name, Description: t.description, InputSchema: schema}, t.handler)
	}
}

// constant answers every call with the same result.
func constant(res *mcp.CallToolResult) mcp.ToolHandler {
	return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res, nil }
}

func registerCoreTools(s *mcp.Server) {
	addTools(s, []fixtureTool{
		{name: "test_simple_text", description: "Returns one text block.",
			handler: constant(textResult("This is a simple text response for testing."))},
		{name: "test_image_content", description: "Returns one PNG image block.",
			handler: constant(&mcp.CallToolResult{Content: []mcp.Content{
				&mcp.ImageContent{Data: pngPixel, MIMEType: "image/png"}}})},
		{name: "test_audio_content", description: "Returns one WAV audio block.",
			handler: constant(&mcp.CallToolResult{Content: []mcp.Content{
				&mcp.AudioContent{Data: wavSilence, MIMEType: "audio/wav"}}})},
		{name: "test_embedded_resource", description: "Returns one embedded text resource.",
			handler: constant(&mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}}}})},
		{name: "test_multiple_content_types", description: "Returns text, image and embedded resource blocks.",
			handler: constant(&mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "Multiple content types test:"},
				&mcp.ImageContent{Data: pngPixel, MIMEType: "image/png"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
					URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}},
			}})},
		{name: "test_error_handling", description: "Always fails with a tool error (isError).",
			handler: constant(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{
				&mcp.TextContent{Text: "This tool intentionally returns an error for testing"}}})},
		{name: "test_tool_with_progress", description: "Reports progress 0, 50 and 100 of 100 when given a progress token.",
			handler: progressTool},
		{name: "test_logging_tool", description: "Logs one message; it reaches the client only if the request set a log level.",
			handler: loggingTool},
		{name: "test_missing_capability", description: "Needs the sampling client capability; fails with -32021 without it.",
			handler: func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if !declared(req.ClientCapabilities(), "sampling") {
					return nil, missingCapability("sampling")
				}
				return textResult("sampling capability declared"), nil
			}},
		{name: "test_streaming_elicitation", description: "Asks for a name in its result (input_required), never as a request on the response stream.",
			handler: askName("test_streaming_elicitation")},
		{name: "test_trigger_tool_change", description: "Changes the tool list, so listen streams get notifications/tools/list_changed.",
			handler: func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				addTools(s, []fixtureTool{{name: "test_transient_tool", description: "Added by test_trigger_tool_change.",
					handler: constant(textResult("transient"))}})
				return textResult("tool list changed"), nil
			}},
		{name: "test_trigger_prompt_change", description: "Changes the prompt list, so listen streams get notifications/prompts/list_changed.",
			handler: func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				s.AddPrompt(&mcp.Prompt{Name: "test_transient_prompt", Description: "Added by test_trigger_prompt_change."},
					func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
						return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "transient"}}}}, nil
					})
				return textResult("prompt list changed"), nil
			}},
		{name: "json_schema_2020_12_tool", description: "Advertises an input schema using JSON Schema 2020-12 keywords, which must survive tools/list.",
			schema: schema202012, handler: echoArguments},
		{name: "test_x_mcp_header", description: "Mirrors its region argument into the Mcp-Param-Region header (SEP-2243).",
			schema: json.RawMessage(`{"type":"object","properties":{` +
				`"region":{"type":"string","x-mcp-header":"Region"},"level":{"type":"integer"}}}`),
			handler: echoArguments},
	})
}

// schema202012 uses $schema, $defs with $anchor, $ref, allOf/anyOf,
// if/then/else and additionalProperties.
var schema202012 = json.RawMessage(`{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"$defs": {"address": {"$anchor": "address", "type": "object",
		"properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
	"properties": {
		"name": {"type": "string"},
		"address": {"$ref": "#/$defs/address"},
		"contactMethod": {"enum": ["phone", "email"]},
		"phone": {"type": "string"},
		"email": {"type": "string"}
	},
	"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
	"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
	"then": {"required": ["phone"]},
	"else": {"required": ["email"]},
	"additionalProperties": false
}`)

func echoArguments(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := string(req.Params.Arguments)
	if args == "" {
		args = "{}"
	}
	return textResult("arguments: " + args), nil
}

func progressTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	token := req.Params.GetProgressToken()
	for i, p := range []float64{0, 50, 100} {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		if token == nil {
			continue
		}
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: p, Total: 100, Message: fmt.Sprintf("step %.0f of 100", p)}); err != nil {
			return nil, err
		}
	}
	return textResult(fmt.Sprintf("progress reported for token %v", token)), nil
}

func loggingTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "conformance", Data: "test_logging_tool ran"})
	return textResult("logged one message (sent only when the request set a log level)"), nil
}
