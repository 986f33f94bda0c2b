package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/internal/netx"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// readBody reads the whole body, at most maxBody bytes. A small declared
// length (a poll's) is read into a buffer of that size: net/http ends the
// body there, and reports a shorter one as an error. Any other body is
// read, and refused over the cap, by the MaxBytesReader, growing as bytes
// arrive: a large declared length alone never makes darkroom allocate.
// exactReadMax bounds what readBody allocates before the bytes arrive:
// enough for the largest listen (1,000 task ids, about 45 KB), read
// without growing a buffer; the caller is authenticated, and its
// connection's read timeout bounds how long it may hold it.
const exactReadMax = 64 << 10

func readBody(w http.ResponseWriter, r *http.Request, maxBody int64) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= min(maxBody, exactReadMax) {
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
}

// Admit is the door of the MCP endpoint below any caller-specific work:
// for a POST it reads and parses the whole body (at most maxBody bytes),
// leaves the envelope in the returned request's context, restores the
// body for the next handler, and answers, with
// nothing executed, a body over the cap (413), one that is not a JSON-RPC
// message (-32700 or -32600), and a 2026-07-28 request whose required
// headers are missing or disagree with its body (-32020). It reports
// false when it answered. It runs once a request (server's admit, or
// Middleware's when nothing admitted it before); every later layer reads
// the envelope it leaves in the context (Admitted). The Host was checked
// before it (HostAllowed, server's checkOrigin).
func Admit(w http.ResponseWriter, r *http.Request, maxBody int64) (*envelope.Envelope, *http.Request, bool) {
	edgecount.Admissions.Add(1)
	body, err := readBody(w, r, maxBody)
	_ = r.Body.Close()
	r.Body = http.NoBody
	var e *envelope.Envelope
	if err == nil {
		e, err = envelope.ParseBody(body)
	}
	if err != nil { // a body that fails is never handed on
		writeBodyError(w, err)
		return nil, r, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r = r.WithContext(envelope.NewContext(r.Context(), e))
	for _, m := range e.Messages() {
		if re := checkEnvelopeHeaders(r.Header, &m, e.IsBatch); re != nil {
			envelope.WriteError(w, m.ID, re)
			return nil, r, false
		}
	}
	e.Admitted = true
	return e, r, true
}

// Admitted returns the envelope Admit accepted for the request of ctx.
func Admitted(ctx context.Context) (*envelope.Envelope, bool) {
	e, ok := envelope.From(ctx)
	return e, ok && e.Admitted
}

// HostAllowed is go-sdk's DNS-rebinding guard: on a loopback listener the
// Host must be loopback too. It runs once a request, at the door
// (server's checkOrigin; go-sdk's own is turned off behind it).
func HostAllowed(r *http.Request) bool {
	edgecount.HostChecks.Add(1)
	switch la := r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr: // the usual listener, read without formatting it
		return la == nil || !la.IP.IsLoopback() || netx.Loopback(r.Host)
	case interface{ String() string }:
		return la == nil || !netx.Loopback(la.String()) || netx.Loopback(r.Host)
	}
	return true
}

// checkEnvelopeHeaders refuses, before any work, a request whose headers
// are required and missing or differ from its body: a request carrying
// _meta protocolVersion needs an equal MCP-Protocol-Version header, and on
// 2026-07-28 every request needs Mcp-Method equal to its method and, for
// the named methods, Mcp-Name equal to the name. A 2026-07-28 call without
// the required _meta is -32602 first (the spec's order). Batches carry no
// such headers (go-sdk refuses them on these versions anyway).
func checkEnvelopeHeaders(h http.Header, m *envelope.Message, batch bool) *tasks.RPCError {
	if !m.Request {
		return nil
	}
	hv := h.Get("Mcp-Protocol-Version")
	modern := hv >= tasks.TasksVersion
	if m.Call && modern && (m.Version == "" || !m.HasCaps) {
		return tasks.MissingMeta()
	}
	if m.Version != "" && hv != m.Version {
		return tasks.HeaderMismatch(fmt.Sprintf("MCP-Protocol-Version %q does not match _meta protocolVersion %q", hv, m.Version))
	}
	if !modern || batch {
		return nil
	}
	if v := envelope.DecodeHeader(h.Get("Mcp-Method")); v != m.Method {
		return tasks.HeaderMismatch(fmt.Sprintf("Mcp-Method %q does not match method %q", v, m.Method))
	}
	if m.Row.Named != "" {
		if v := envelope.DecodeHeader(h.Get("Mcp-Name")); v != m.Name || v == "" {
			return tasks.HeaderMismatch(fmt.Sprintf("Mcp-Name %q does not match the name in the body", v))
		}
	}
	return nil
}

// writeBodyError answers a request whose body could not be read or parsed.
func writeBodyError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	var re *tasks.RPCError
	switch {
	case errors.As(err, &mbe):
		http.Error(w, fmt.Sprintf("request body too large (over %d bytes)", mbe.Limit), http.StatusRequestEntityTooLarge)
	case errors.As(err, &re):
		envelope.WriteError(w, nil, re)
	default:
		w.Header().Set("Connection", "close")
		http.Error(w, "request body could not be read: "+err.Error(), http.StatusBadRequest)
	}
}

// DeclaredMethod is the method a 2026-07-28 request's Mcp-Method header
// names ("" on earlier versions, which carry no such header). A request
// whose body says otherwise is refused at the door (-32020), so what is
// decided on it before the body is read can only refuse early what would
// be refused anyway.
func DeclaredMethod(h http.Header) string {
	if h.Get("Mcp-Protocol-Version") < tasks.TasksVersion {
		return ""
	}
	return envelope.DecodeHeader(h.Get("Mcp-Method"))
}
