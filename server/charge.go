package server

import (
	"net/http"
	"time"

	"github.com/darkroom-mcp/darkroom/compat"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// class names the bucket a message draws from ("" for none), from its
// method and name as parsed from the body: tasks/get polls; a tool call
// draws what its definition says (compat.RateClass).
func class(method, name string, toolClass func(string) string) string {
	switch method {
	case "tasks/get", "resources/read": // resources/read reads a blob, as download_output links one
		return compat.ClassPoll
	case "tools/call":
		return toolClass(name)
	}
	return ""
}

// admit is the door of /mcp below authentication: tasks.Admit reads the
// whole body once and refuses, with nothing executed, a body over the cap
// (413), one that is not exactly one JSON value (-32700) or not JSON-RPC
// (-32600), and a 2026-07-28 request whose headers disagree with its body
// (-32020). What passes is charged as what its body asks for, whatever the
// headers say and on every protocol version: each call that draws from a
// bucket (every element of a batch) takes one token, and an empty
// bucket is HTTP 429 with Retry-After and JSON-RPC error -31429 carrying
// retryAfterMs. A wait_generation is one call however long it waits.
// With c nil nothing is charged.
func admit(c *limit.Classes, maxBody int64, toolClass func(string) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		env, r, ok := tasks.Admit(w, r, maxBody)
		if !ok {
			return
		}
		if c != nil {
			p, _ := auth.FromContext(r.Context())
			if ok, wait := charge(c, Owner(r.Context()), p.Limits, env.Messages(), toolClass); !ok {
				limit.WriteHTTP(w, env.ID, wait) // a batch's id is null
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// charge takes the messages' tokens from the caller's buckets (per-caller
// overrides from the key file apply): all of a bucket's or none. In a
// batch mixing creations and polls, creations are charged first and stay
// spent if the polls are then refused.
func charge(c *limit.Classes, key string, o auth.Overrides, msgs []tasks.Message, toolClass func(string) string) (bool, time.Duration) {
	var polls, creates int
	for _, m := range msgs {
		if !m.Call {
			continue // go-sdk runs no call-type method sent as a notification
		}
		switch class(m.Method, m.Name, toolClass) {
		case compat.ClassPoll:
			polls++
		case compat.ClassCreate:
			creates++
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
	return true, 0
}
