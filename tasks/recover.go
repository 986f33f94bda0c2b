package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PanicMessage is what a caller is told when its request's handler
// panicked: go-sdk recovers no panic and runs each request in a
// goroutine of its own, so one would otherwise end the process.
const PanicMessage = "internal error in darkroom while serving this request (logged on the server); nothing else is affected, retry or report it"

// Recovered is the one answer to a panic while serving a request (v,
// from recover): logged with its stack, answered -32603. Every serving
// path defers it: go-sdk's (server.New's middleware) and the dispatcher's
// below it.
func Recovered(log *slog.Logger, method, name string, v any) *RPCError {
	log.Error("panic serving a request", "method", method, "name", name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return &RPCError{Code: CodeInternal, Message: PanicMessage, HTTPStatus: http.StatusInternalServerError}
}

// InternalMessage is what a caller is told when its request failed on
// something of darkroom's own (the database unreachable, most likely):
// the cause stays in the server's log, since its text names internals
// (addresses, users, statements) that are no caller's business.
const InternalMessage = "internal error in darkroom while serving this request (logged on the server); retry shortly, or report it if it persists"

// Internal is the one answer to a request whose handler failed with err,
// an error meant for no caller: logged, answered -32603 without its text.
// Every serving path uses it: go-sdk's (server.New's middleware) and the
// dispatcher's.
func Internal(ctx context.Context, log *slog.Logger, method, name string, err error) *RPCError {
	level := slog.LevelError
	if ctx.Err() != nil {
		level = slog.LevelDebug // the caller left: the error is most likely that
	}
	log.Log(ctx, level, "request failed", "method", method, "name", name, "err", err)
	return &RPCError{Code: CodeInternal, Message: InternalMessage, HTTPStatus: http.StatusInternalServerError}
}

// guardTool is h recovering its panics as Recovered's error; each run is
// a handler run (edgecount.Handlers).
func (d *Dispatcher) guardTool(name string, h ToolHandler) ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (out ToolOutcome, err error) {
		edgecount.Handler()
		defer func() {
			if v := recover(); v != nil {
				out, err = ToolOutcome{}, panicError{Recovered(d.opts.Logger, methodToolsCall, name, v)}
			}
		}()
		return h(ctx, req)
	}
}

// guardRead is guardTool for a ReadHandler (its Render is guarded where
// it is called: answerOf).
func (d *Dispatcher) guardRead(name string, h ReadHandler) ReadHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (r Reply, err error) {
		edgecount.Handler()
		defer func() {
			if v := recover(); v != nil {
				r, err = Reply{}, panicError{Recovered(d.opts.Logger, methodToolsCall, name, v)}
			}
		}()
		return h(ctx, req)
	}
}

// guardResource is guardTool for a ResourceHandler.
func (d *Dispatcher) guardResource(h ResourceHandler) ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (res mcp.Result, err error) {
		edgecount.Handler()
		defer func() {
			if v := recover(); v != nil {
				res, err = nil, panicError{Recovered(d.opts.Logger, "resources/read", req.Params.URI, v)}
			}
		}()
		return h(ctx, req)
	}
}

// panicError marks Recovered's answer from a guarded handler: the lean
// engine answers it as it is (sdkError).
type panicError struct{ *RPCError }

func (p panicError) Unwrap() error { return p.RPCError }
