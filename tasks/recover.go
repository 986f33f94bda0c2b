package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
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
