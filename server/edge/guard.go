package edge

import (
	"context"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// guardTool is h recovering its panics as tasks.Recovered's error; each
// run is a handler run (edgecount.Handlers).
func (en *Engine) guardTool(name string, h tasks.ToolHandler) tasks.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (out tasks.ToolOutcome, err error) {
		edgecount.Handler()
		defer func() {
			if v := recover(); v != nil {
				out, err = tasks.ToolOutcome{}, panicError{tasks.Recovered(en.log, methodToolsCall, name, v)}
			}
		}()
		return h(ctx, req)
	}
}

// guardRead is guardTool for a ReadHandler (its Render is guarded where
// it is called: answerOf).
func (en *Engine) guardRead(name string, h ReadHandler) ReadHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (r Reply, err error) {
		edgecount.Handler()
		defer func() {
			if v := recover(); v != nil {
				r, err = Reply{}, panicError{tasks.Recovered(en.log, methodToolsCall, name, v)}
			}
		}()
		return h(ctx, req)
	}
}

// guardResource is guardTool for a ResourceHandler.
func (en *Engine) guardResource(h ResourceHandler) ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (res mcp.Result, err error) {
		edgecount.Handler()
		defer func() {
			if v := recover(); v != nil {
				res, err = nil, panicError{tasks.Recovered(en.log, methodResourcesRead, req.Params.URI, v)}
			}
		}()
		return h(ctx, req)
	}
}

// panicError marks tasks.Recovered's answer from a guarded handler: the
// engine answers it as it is (sdkError).
type panicError struct{ *tasks.RPCError }

func (p panicError) Unwrap() error { return p.RPCError }
