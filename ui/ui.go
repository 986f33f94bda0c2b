// Package ui is darkroom's MCP Apps view (io.modelcontextprotocol/ui,
// SEP-1865, specification 2026-01-26): the ui://darkroom/generation
// resource (one self-contained HTML document, built from web/viewer and
// embedded), the app-only view_generation tool, and the linkage that hosts
// read (_meta.ui.resourceUri on the generation tools).
//
// A client that does not declare the extension sees darkroom exactly as
// without this package: tools/list and resources/list lose the view's
// entries and _meta, and a call of view_generation or a read of the view
// answers as an unknown tool or resource would.
package ui

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// ExtensionID names the MCP Apps extension in capabilities.
	ExtensionID = "io.modelcontextprotocol/ui"
	// MimeType is the MCP App HTML profile.
	MimeType = "text/html;profile=mcp-app"
	// ResourceURI is the generation view.
	ResourceURI = "ui://darkroom/generation"
	// ViewTool is the tool only the view calls.
	ViewTool = "view_generation"
	// modernVersion is the first revision whose requests carry their own
	// client capabilities.
	modernVersion = "2026-07-28"

	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// LinkedTools are the tools whose results the view renders.
var LinkedTools = []string{"generate", "get_generation", "wait_generation"}

//go:embed viewer.html
var viewerHTML string

// HTML is the built view.
func HTML() string { return viewerHTML }

// Capability adds the extension to the server's capabilities, and the
// resources capability the view is read through (server serves no
// resources/* method without it).
func Capability(c *mcp.ServerCapabilities) {
	c.AddExtension(ExtensionID, map[string]any{"mimeTypes": []any{MimeType}})
	if c.Resources == nil {
		c.Resources = &mcp.ResourceCapabilities{}
	}
}

// Declared reports whether the client behind req declared the extension,
// decided as tasks.Version decides the protocol revision: a connection
// that went through initialize (a 2025 stdio session; go-sdk's stand-in for
// a pre-2026 HTTP POST, which carries no capabilities) answers with the
// capabilities of its handshake; otherwise only the request's own _meta
// client capabilities count, on the 2026-07-28 wire or later. Nothing is
// remembered between requests.
func Declared(req mcp.Request) bool {
	if req == nil {
		return false
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		if ip := ss.InitializeParams(); ip != nil {
			return ip.Capabilities != nil && isObject(ip.Capabilities.Extensions[ExtensionID])
		}
	}
	p := req.GetParams()
	if p == nil || reflect.ValueOf(p).IsNil() { // params are pointers; absent ones are typed nils
		return false
	}
	meta := p.GetMeta()
	if v, _ := meta[metaProtocolVersion].(string); v < modernVersion {
		return false
	}
	caps, _ := meta[metaClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	return isObject(ext[ExtensionID])
}

func isObject(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// Register adds the view resource to s, and the middleware that links the
// generation tools to the view for clients that declared the extension
// and hides the view and its tool (Tool) from the others.
func Register(s *mcp.Server) {
	s.AddResource(&mcp.Resource{
		URI:         ResourceURI,
		Name:        "generation-viewer",
		Title:       "darkroom generation viewer",
		Description: "Shows a generation: the image or video, its prompt, model, cost and size; live progress while it runs, with Cancel and Download.",
		MIMEType:    MimeType,
		Meta:        resourceMeta(),
	}, readView)
	s.AddReceivingMiddleware(middleware)
}

// resourceMeta: the view needs no origin at all (images come through the
// host as data), so the CSP lists none; a border sets it apart from text.
func resourceMeta() mcp.Meta {
	return mcp.Meta{"ui": map[string]any{"csp": map[string]any{}, "prefersBorder": true}}
}

func readView(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
		URI: ResourceURI, MIMEType: MimeType, Text: viewerHTML, Meta: resourceMeta(),
	}}}, nil
}

// toolMeta is what a host reads to render a tool's result in the view.
func toolMeta() map[string]any { return map[string]any{"resourceUri": ResourceURI} }

// middleware filters go-sdk's answers by the caller's declaration. The
// registered tools stay as they are; linked copies are made per request.
func middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		declared := Declared(req)
		switch method {
		case "tools/call":
			if r, ok := req.(*mcp.CallToolRequest); ok && !declared && r.Params != nil && r.Params.Name == ViewTool {
				// As go-sdk answers a tool it does not have.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", ViewTool)}
			}
		case "resources/read":
			if r, ok := req.(*mcp.ReadResourceRequest); ok && !declared && r.Params != nil && r.Params.URI == ResourceURI {
				return nil, mcp.ResourceNotFoundError(ResourceURI)
			}
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			out := *r
			out.Tools = linkTools(r.Tools, declared)
			return &out, nil
		case *mcp.ListResourcesResult:
			if !declared {
				out := *r
				out.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(x *mcp.Resource) bool { return x.URI == ResourceURI })
				return &out, nil
			}
		}
		return res, err
	}
}

// linkTools returns tools for one caller: without the view tool when it
// did not declare the extension, else with the linked tools' _meta.ui.
func linkTools(tools []*mcp.Tool, declared bool) []*mcp.Tool {
	out := make([]*mcp.Tool, 0, len(tools))
	for _, t := range tools {
		switch {
		case t.Name == ViewTool && !declared:
			continue
		case declared && slices.Contains(LinkedTools, t.Name):
			c := *t
			c.Meta = maps.Clone(t.Meta)
			if c.Meta == nil {
				c.Meta = mcp.Meta{}
			}
			c.Meta["ui"] = toolMeta()
			t = &c
		}
		out = append(out, t)
	}
	return out
}
