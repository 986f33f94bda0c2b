package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResourceHandler answers resources/read for ServeResource: the result as
// go-sdk's handler chain would return it (an mcp.Result whose encoding is
// the wire's), or an error for go-sdk to answer instead.
type ResourceHandler func(ctx context.Context, req *mcp.ReadResourceRequest) (mcp.Result, error)

// ServeResource lets the engine answer resources/read of a URI lean
// takes (nil: every URI) below go-sdk with h, on the 2026-07-28 wire and
// the legacy stateless eras, byte for byte as go-sdk would (framed as
// JSON), its blobs streamed as a Tool's with Bytes, its errors as
// go-sdk's path answers them: h returns them as that path's middleware
// leaves them. The dispatcher's Options.ServerInfo must be set.
func (en *Engine) ServeResource(h ResourceHandler, lean func(uri string) bool) {
	en.resource, en.resourceLean = h, lean
}

// serveResource answers a resources/read (Route chose it), whatever its
// handler returns.
func (en *Engine) serveResource(w http.ResponseWriter, r *http.Request, env *envelope.Envelope, l *Call, owner string) {
	ctx, df := outbytes.WithDeferral(r.Context())
	var res mcp.Result
	err := en.guard(env, func() (err error) {
		res, err = en.resource(ctx, l.readResource)
		return err
	})
	var b []byte
	if err == nil {
		b, err = en.resourceResult(res, l.modern)
	}
	if err == nil {
		err = en.writeResult(w, r, env.ID, owner, b, false, df)
	}
	if err != nil {
		en.fail(w, r, env, l, err)
	}
}

// resourceResult encodes a resources/read result as go-sdk does for the
// era (finish).
func (en *Engine) resourceResult(res mcp.Result, modern bool) ([]byte, error) {
	if res == nil {
		return nil, errors.New("edge: a resource handler returned no result and no error")
	}
	if rr, ok := res.(*mcp.ReadResourceResult); modern && (!ok || rr.Meta != nil) {
		return nil, errors.New("edge: a resource result with its own _meta") // ReadResource sets none
	}
	b, err := json.Marshal(res)
	return en.finish(b, err, modern, true)
}

// plainString reports a JSON string rawString takes as it is (no escapes):
// env.Name is then exactly what go-sdk decodes.
func plainString(raw json.RawMessage) bool {
	s, ok := envelope.RawString(raw)
	return ok && len(s) == len(raw)-2
}

// writeResult answers with the result body (isError: a tool's): framed as JSON, each blob df
// holds streamed into it in place of its sentinel. It returns an error,
// with nothing written, for its caller to answer (a blob that no longer
// opens, a sentinel that is not where it should be).
//
// The caller's share of the process-wide byte budget is taken before the
// blobs open and held until the last byte is handed to the connection or
// the connection fails: what a stream keeps resident is its encoding
// without the blobs and its chunk buffers (outbytes.StreamCost), so a
// client that stops reading holds one chunk until the write deadline
// (server.Timeouts.Write) cuts it. Past the budget the answer is an
// immediate 429 with Retry-After. A blob whose bytes do not match its
// record aborts the response before its last chunk: the client sees a
// broken response, never wrong bytes.
func (en *Engine) writeResult(w http.ResponseWriter, r *http.Request, id json.RawMessage, owner string, body []byte, isError bool, df *outbytes.Deferral) error {
	if df == nil || !df.Deferred() {
		envelope.Tell(w, 0, isError)
		envelope.WriteFramed(w, http.StatusOK, id, "result", body)
		return nil
	}
	release, err := en.bytes.TryAcquire(owner, outbytes.StreamCost(len(body)))
	var refused *outbytes.Refused
	if errors.As(err, &refused) {
		envelope.Tell(w, ratelimited.Code, false)
		ratelimited.WriteHTTP(w, id, refused.RetryAfter)
		return nil
	}
	defer release()
	plan, err := df.Plan(r.Context(), body)
	if err != nil {
		return err
	}
	defer plan.Close()
	var open [64]byte
	head := envelope.FrameHead(open[:0], id, "result")
	h := w.Header()
	h["Content-Type"] = envelope.JSONContentType
	h["Content-Length"] = []string{strconv.FormatInt(int64(len(head))+plan.Len+1, 10)}
	envelope.Tell(w, 0, isError)
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(head); err != nil {
		return nil
	}
	if _, err := plan.WriteTo(w); err != nil {
		if errors.Is(err, outbytes.ErrMismatch) {
			en.log.Error("output bytes do not match their record: response aborted", "err", err)
			panic(http.ErrAbortHandler)
		}
		return nil // the connection is gone (or its write deadline passed)
	}
	_, _ = w.Write([]byte{'}'})
	return nil
}
