package comfyui

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
)

// Listed implements provider.Lister, for darkroom models check and the
// catalog watch: a workflow (keyed by its model id) is listed when one
// backend that answers knows every node class it uses; otherwise it is
// not, with the reason naming the missing nodes. What each backend has
// is kept: choose sends a workflow only to a backend with its nodes. The classes are GET
// /object_info's keys (server.py get_object_info: {class_type:
// node_info} of every class loaded, custom nodes included; Comfy-Org/
// ComfyUI a125cd84, 2025-10-12). No backend answering is an error: an
// outage withdraws nothing.
func (p *Provider) Listed(ctx context.Context) (provider.Listing, error) {
	known := map[string]map[string]bool{} // by backend host
	var errs []string
	for _, a := range askAll(p.backends, func(b *backend) (map[string]bool, error) { return p.nodeClasses(ctx, b) }) {
		if a.err != nil {
			errs = append(errs, a.b.host+": "+a.err.Error())
			continue
		}
		known[a.b.host] = a.v
	}
	if len(known) == 0 {
		slices.Sort(errs)
		return nil, &provider.RetryableError{Err: fmt.Errorf("comfyui: no backend answers GET /object_info (%s)", strings.Join(errs, "; "))}
	}
	out := provider.Listing{}
	for id, w := range p.models {
		out[id] = w.listedOn(known)
	}
	return out, nil
}

// listedOn is whether some backend of known (its node classes by host)
// knows every node class of w, and if none does, why.
func (w *Workflow) listedOn(known map[string]map[string]bool) provider.VendorModel {
	var nowhere, partly []string
	for _, c := range w.classes() {
		on := 0
		for _, k := range known {
			if k[c] {
				on++
			}
		}
		switch on {
		case 0:
			nowhere = append(nowhere, c)
		case len(known):
		default:
			partly = append(partly, c)
		}
	}
	if len(nowhere) > 0 {
		verb := "is"
		if len(nowhere) > 1 {
			verb = "are"
		}
		return provider.VendorModel{Reason: fmt.Sprintf("%s %s not installed on any backend", words.And(nowhere), verb)}
	}
	for _, k := range known {
		if !slices.ContainsFunc(partly, func(c string) bool { return !k[c] }) {
			return provider.VendorModel{Listed: true}
		}
	}
	return provider.VendorModel{Reason: fmt.Sprintf("no one backend has all of its nodes (%s each missing on some)", words.And(partly))}
}

// classes are the node classes w uses, sorted.
func (w *Workflow) classes() []string {
	need := map[string]bool{}
	for _, n := range w.graph {
		need[n.ClassType] = true
	}
	return slices.Sorted(maps.Keys(need))
}

// nodeClasses reads a backend's /object_info, streamed (with many custom
// nodes it runs to megabytes): its keys, each value skipped. Only the
// classes some workflow uses are kept, so what is held is bounded by the
// workflows, not by what a backend answers.
func (p *Provider) nodeClasses(ctx context.Context, b *backend) (map[string]bool, error) {
	used := map[string]bool{}
	for _, w := range p.models {
		for _, c := range w.classes() {
			used[c] = true
		}
	}
	out := map[string]bool{}
	err := p.eachEntry(ctx, b, "/object_info", func(class string, dec *json.Decoder) (bool, error) {
		var skip json.RawMessage
		if used[class] {
			out[class] = true
		}
		return false, dec.Decode(&skip)
	})
	if err != nil {
		return nil, err
	}
	b.answered()
	b.mu.Lock()
	b.classes = out // choose sends a workflow only where its nodes are
	b.mu.Unlock()
	return out, nil
}

// eachEntry streams the JSON object GET path answers, calling each with
// every key and the decoder at its value (which each must read) until
// each says it is done; each value is read on its own, so a long answer
// costs time, not memory.
func (p *Provider) eachEntry(ctx context.Context, b *backend, path string, each func(key string, dec *json.Decoder) (done bool, err error)) error {
	stream, r, err := p.files.Open(ctx, httpx.Other, http.MethodGet, b.origin+path, nil, "", nil)
	if err != nil {
		return err
	}
	if stream == nil {
		return p.http.Err(r)
	}
	defer stream.Body.Close()
	bad := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &provider.RetryableError{Err: fmt.Errorf("comfyui: unreadable %s of %s: %w", path, b.host, err)}
	}
	dec := json.NewDecoder(stream.Body)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad(fmt.Errorf("not an object (%v)", err))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		key, _ := tok.(string)
		done, err := each(key, dec)
		if err != nil {
			return bad(err)
		}
		if done {
			return nil
		}
	}
	return nil
}
