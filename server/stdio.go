package server

import (
	"context"
	"unsafe"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LimitTransport charges every message read from t (stdio: every line,
// and every element of a batch line) to owner's buckets, as HTTP does
// (charge, by internal/methods): the class comes from the message's
// method and params as go-sdk decoded them, the bytes are its params'. A
// call over the limit is answered -31429 (data.retryAfterMs) and never
// reaches the server; a notification over it is dropped. Wrap it inside
// the tasks dispatcher's transport, so tasks/* and listen are charged too.
func LimitTransport(t mcp.Transport, c *limit.Classes, toolClass func(string) string, owner string) mcp.Transport {
	return &limitTransport{inner: t, c: c, toolClass: toolClass, owner: owner}
}

type limitTransport struct {
	inner     mcp.Transport
	c         *limit.Classes
	toolClass func(string) string
	owner     string
}

func (t *limitTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &limitConn{Connection: conn, t: t}, nil
}

type limitConn struct {
	mcp.Connection
	t *limitTransport
}

func (c *limitConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	return tasks.ReadRequests(ctx, c.Connection, func(req *jsonrpc.Request, m *envelope.Message) (bool, error) {
		// stdio is the single local principal: no per-key overrides. m
		// itself, not a copy: what the charge decodes of it is kept.
		allowed, wait := charge(c.t.c, c.t.owner, auth.Overrides{}, unsafe.Slice(m, 1), len(req.Params), c.t.toolClass)
		if allowed || !req.IsCall() { // a notification over the limit is dropped
			return !allowed, nil
		}
		return true, c.Connection.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: ratelimited.RPCError(wait)})
	})
}
