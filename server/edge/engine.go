// Package edge is the MCP endpoint's door, its dispatch step and its lean
// engine: the door admits each POST once (Admit: the body read and parsed,
// the Host and SEP-2243 headers checked), then Route decides once and
// finally who answers it: the Tasks extension (tasks.Dispatcher.Serve),
// the lean engine, which runs a tool or resources/read handler itself,
// below go-sdk, and answers every outcome byte for byte as go-sdk would,
// or go-sdk.
package edge

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// Options configure an Engine.
type Options struct {
	Logger *slog.Logger
	// Bytes is the process-wide budget of output bytes in flight, which
	// streamed reads draw from (Tool.Bytes, ServeResource); nil: unbounded.
	Bytes *outbytes.Budget
}

// Engine routes the MCP endpoint's POSTs and runs the lean calls.
type Engine struct {
	tasks *tasks.Dispatcher
	log   *slog.Logger
	bytes *outbytes.Budget
	tools map[string]Tool // see ServeTool
	// resource answers resources/read (ServeResource).
	resource     ResourceHandler
	resourceLean func(uri string) bool
	// readInfo and readMeta are the MCP server's serverInfo, and the
	// opening of a result carrying it.
	readInfo any
	readMeta []byte
	// replies are the dispatcher's encoded replies, shared with tasks/get.
	replies tasks.Replies
}

// New builds an engine in front of d, the Tasks extension's dispatcher.
func New(d *tasks.Dispatcher, o Options) *Engine {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{tasks: d, log: o.Logger, bytes: o.Bytes, replies: d.Replies(), tools: map[string]Tool{}}
	// The serverInfo go-sdk adds to a 2026-07-28 result's _meta is the
	// dispatcher's (one Implementation for every answer).
	if e.readInfo = d.ServerInfo(); e.readInfo != nil {
		info, _ := json.Marshal(e.readInfo)
		e.readMeta = append(append([]byte(`{"_meta":{"`+tasks.MetaServerInfo+`":`), info...), "},"...)
	}
	return e
}

// Tasks is the dispatcher the engine routes the Tasks methods to (nil
// for no engine: go-sdk alone).
func (en *Engine) Tasks() *tasks.Dispatcher {
	if en == nil {
		return nil
	}
	return en.tasks
}

// Middleware serves the MCP endpoint's POSTs it routes to the Tasks
// extension or the lean engine and passes every other request to next
// (go-sdk). owner names the authenticated caller of a request.
func (en *Engine) Middleware(owner func(*http.Request) string, maxBody int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				next.ServeHTTP(w, r)
				return
			}
			env, ok := Admitted(r.Context())
			if !ok { // served alone, with no door before it
				if !HostAllowed(r) {
					http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
					return
				}
				if env, r, ok = Admit(w, r, maxBody); !ok {
					return
				}
			}
			path, l := en.Route(r, env)
			if o, ok := w.(envelope.Outcome); ok {
				o.ServedBy(path)
			}
			switch path {
			case envelope.PathLean: // every outcome answered here: nothing handed back, nothing run twice
				if l.readResource != nil {
					en.serveResource(w, r, env, l, owner(r))
				} else {
					en.serveTool(w, r, env, l, owner(r))
				}
			case envelope.PathSDK:
				next.ServeHTTP(w, r)
			default:
				en.tasks.Serve(w, r, owner(r))
			}
		})
	}
}
