package server

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/internal/methods"
	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/edge"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// ListenIDsPerToken is how many task ids of one subscriptions/listen one
// poll token pays for: a listen on up to 50 tasks costs one poll (it
// replaces polling each of them), and the largest one
// (tasks.MaxListenTaskIDs, 1,000 ids: 2,000 lookups and 1,000 renders up
// front) costs 20, the whole default poll burst.
const ListenIDsPerToken = 50

// ClassOf is the rate class of a message with method (and, for
// tools/call, tool name) name: its row in internal/methods (a method not
// listed costs a poll, never nothing), a tool's own class. It is the
// only place a method's charge is decided, on HTTP (admit) and stdio
// (LimitTransport) alike.
func ClassOf(method, name string, toolClass func(string) string) string {
	m, _ := methods.Lookup(method)
	if m.Class != methods.ClassTool {
		return m.Class
	}
	if toolClass != nil {
		if c := toolClass(name); c != "" {
			return c
		}
	}
	return methods.ClassCreate // a tool that names no class: the strictest bucket
}

// admit is the door of /mcp below authentication: edge.Admit reads the
// whole body once and refuses, with nothing executed, a body over the cap
// (413), one that is not exactly one JSON value (-32700) or not JSON-RPC
// (-32600), and a 2026-07-28 request whose headers disagree with its body
// (-32020). What passes is charged as what its body asks for, whatever the
// headers say and on every protocol version (charge). An empty bucket is
// HTTP 429 with Retry-After and JSON-RPC error -31429 carrying
// retryAfterMs. A wait_generation is one call however long it waits.
// With c nil nothing is charged. It holds what passes its output-bytes
// shares until it is answered.
func admit(c *limit.Classes, maxBody int64, toolClass func(string) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if c != nil {
			if short, wait := unreadRefusal(c, r); short {
				if r.ContentLength <= keptBodyMax {
					_, _ = io.Copy(io.Discard, r.Body) // read, not parsed: the connection is kept
				}
				ratelimited.WriteHTTP(w, nil, wait) // the id is in the body, unread
				return
			}
		}
		env, ok := edge.Admitted(r.Context()) // publicHandshake's door, before authentication
		if !ok {
			if env, r, ok = edge.Admit(w, r, maxBody); !ok {
				return
			}
		}
		defer observe(w, env)()
		if c != nil {
			p, _ := auth.FromContext(r.Context())
			if ok, wait := charge(c, Owner(r.Context()), p.Limits, env.Messages(), len(env.Body), toolClass); !ok {
				ratelimited.WriteHTTP(w, env.ID, wait) // a batch's id is null
				return
			}
		}
		// The output-bytes shares the request's handlers take on go-sdk's
		// path (outbytes.Read) are held until the handler chain returns:
		// by then net/http has the whole response, or the connection is
		// gone.
		ctx, release := outbytes.WithHold(r.Context())
		defer release()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// unreadBodyMin is the declared size from which a request that cannot
// be paid is refused before its body is read (unreadRefusal).
const unreadBodyMin = 4 << 10

// keptBodyMax is the largest unread body discarded so that its
// connection is kept (net/http's own bound after a handler); a larger one
// closes the connection.
const keptBodyMax = 256 << 10

// unreadRefusal refuses, before its body is read, a request of
// unreadBodyMin bytes or more that its caller cannot pay: one whose
// declared length is past what the caller's byte bucket holds (any
// method, any version), or a 2026-07-28 request whose declared method
// draws poll tokens its bucket lacks: one, or for a listen as many as the
// caller's last refused listen (ListenOwed). A flood of large bodies then
// costs its sender its bytes, not the server a read and a parse of each.
// The declared method is trustworthy here (edge.DeclaredMethod);
// tools/call is left to the body, its class being its tool's.
func unreadRefusal(c *limit.Classes, r *http.Request) (bool, time.Duration) {
	if r.ContentLength < unreadBodyMin {
		return false, 0
	}
	key := Owner(r.Context())
	if c.Bytes.Limiter != nil {
		if short, wait := c.Bytes.ShortFor(key, nil, nil, int(r.ContentLength)); short {
			return true, wait
		}
	}
	need := 1
	switch m := edge.DeclaredMethod(r.Header); {
	case m == "" || m == "tools/call":
		return false, 0
	case ClassOf(m, "", nil) == methods.ClassListen:
		need = c.ListenOwed.Of(key)
	}
	p, _ := auth.FromContext(r.Context())
	return c.Poll.ShortFor(key, p.Limits.PollRate, p.Limits.PollBurst, need)
}

// charge takes a body's cost from the caller's buckets (per-caller
// overrides from the key file apply), each bucket all or nothing: its
// bytes from Bytes (upload_input's image is most of them), then for every
// message with a method (each element of a batch, notifications too) its
// class's tokens (ClassOf; a listen's by its task ids). In a batch
// mixing creations and polls, creations are charged first and stay spent
// if the polls are then refused. Responses (no method) answer the
// server's own requests and cost nothing but their bytes.
func charge(c *limit.Classes, key string, o auth.Overrides, msgs []envelope.Message, bytes int, toolClass func(string) string) (bool, time.Duration) {
	var polls, creates int
	var listens []int // each listen's poll tokens: one may take the whole bucket (AllowForAtMostN), never two
	for i := range msgs {
		m := &msgs[i]
		if m.Method == "" {
			continue
		}
		switch ClassOf(m.Method, m.Name, toolClass) {
		case gentools.ClassCreate:
			creates++
		case methods.ClassListen:
			listens = append(listens, max(1, (tasks.ListenIDs(m)+ListenIDsPerToken-1)/ListenIDsPerToken))
		default:
			polls++
		}
	}
	if bytes > 0 && c.Bytes.Limiter != nil {
		if ok, wait := c.Bytes.AllowForAtMostN(key, nil, nil, bytes); !ok {
			return false, wait
		}
	}
	if creates > 0 {
		if ok, wait := c.Create.AllowForN(key, o.CreateRate, o.CreateBurst, creates); !ok {
			return false, wait
		}
	}
	if polls > 0 {
		if ok, wait := c.Poll.AllowForN(key, o.PollRate, o.PollBurst, polls); !ok {
			return false, wait
		}
	}
	for _, n := range listens {
		if ok, wait := c.Poll.AllowForAtMostN(key, o.PollRate, o.PollBurst, n); !ok {
			c.ListenOwed.Note(key, n)
			return false, wait
		}
	}
	if len(listens) > 0 {
		c.ListenOwed.Paid(key)
	}
	return true, 0
}

// listenRetry is the retry hint of a listen refused for too many open
// streams: when one will close is unknown.
const listenRetry = time.Second

// ListenSlots is tasks.Options.OpenListen: each caller holds at most
// c.Listens' bound of open subscriptions/listen streams (HTTP and stdio);
// one more is refused at once, -31429 with retryAfterMs (HTTP 429 with
// Retry-After).
func ListenSlots(c *limit.Classes) func(ctx context.Context, owner string) (func(), *tasks.RPCError) {
	return func(_ context.Context, owner string) (func(), *tasks.RPCError) {
		release, ok := c.Listens.Acquire(owner)
		if ok {
			return release, nil
		}
		return nil, &tasks.RPCError{
			Code:       ratelimited.Code,
			Message:    "too many open subscriptions/listen streams (at most " + strconv.Itoa(c.Listens.Max()) + " per caller): close one, or listen on several tasks in one",
			Data:       ratelimited.ErrorData{RetryAfterMs: ratelimited.RetryAfterMs(listenRetry)},
			HTTPStatus: http.StatusTooManyRequests,
			RetryAfter: ratelimited.RetryAfterHeader(listenRetry),
		}
	}
}
