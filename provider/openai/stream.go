package openai

// Partial images (issue 39 §2). OpenAI's image calls can stream: with
// "stream": true (a JSON boolean for generations, the form field "true"
// for edits) and "partial_images" 0–3, the reply is server-sent events,
// each an "event:" line naming its type and a "data:" line of JSON:
// image_generation.partial_image / image_edit.partial_image
// {b64_json, partial_image_index, output_format, size, ...} while the
// image is made (fewer than asked when it is made quickly), then
// image_generation.completed / image_edit.completed {b64_json, usage,
// ...}. Source: openai-go v3.105.0 (2026-11-19), image.go
// (Images.GenerateStreaming sets "stream": true, EditStreaming the form
// field "stream": "true"; ImageGenerateParams.PartialImages; the event
// unions ImageGenStreamEventUnion and ImageEditStreamEventUnion) and
// packages/ssestream (the event and data lines). Streaming is for the
// GPT image models (the SDK documents Generate and its stream for them);
// GIF and SVG output refuse it.
//
// A partial image becomes the running generation's live preview
// (generation.LivePreviewer: made small by package preview, replaced by
// the next, never an output); the completed event's image is the output,
// scanned into the spool exactly as the plain reply's data[].b64_json is.
// The call stays synchronous: one request, held until the image is made.

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"io"
	"strings"
	"sync"

	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/internal/syncjob"
)

// DefaultPartialImages is how many partial images a streamed call asks
// for: the most OpenAI sends (0–3).
const DefaultPartialImages = 3

// streams reports whether a call of entry e for req asks for partial
// images: a GPT image model, one image (the completed event carries no
// index to tell several apart), an output format that streams, and
// partial images not turned off.
func (p *Provider) streams(e catalog.Entry, req provider.Request, fields map[string]any) bool {
	if p.cfg.PartialImages < 0 || max(req.Count, 1) != 1 {
		return false
	}
	if !strings.HasPrefix(e.Endpoint, "gpt-image") && !strings.HasPrefix(e.Endpoint, "chatgpt-image") {
		return false
	}
	switch fields["output_format"] {
	case "gif", "svg":
		return false
	}
	return true
}

// outputMime is the type of the images a call asked for (png unless
// output_format says otherwise).
func outputMime(fields map[string]any) string {
	switch fields["output_format"] {
	case "jpeg":
		return "image/jpeg"
	case "webp":
		return "image/webp"
	}
	return "image/png"
}

// maxPartialBytes bounds what is decoded of one partial event's data
// line; a longer partial is read past, not shown (preview.Make refuses
// an image beyond the decode budget from its header anyway).
const maxPartialBytes = 32 << 20

// livePreviews are the latest partial images of the calls in flight, by
// generation id; an entry lives as long as its call (at most
// MaxConcurrentCalls of them).
type livePreviews struct {
	mu sync.Mutex
	m  map[string]*liveFrame
}

type liveFrame struct {
	jpeg   []byte
	frames int
}

func (l *livePreviews) begin(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*liveFrame{}
	}
	l.m[id] = &liveFrame{}
}

func (l *livePreviews) end(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, id)
}

func (l *livePreviews) set(id string, jpeg []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f, ok := l.m[id]; ok {
		f.jpeg, f.frames = jpeg, f.frames+1
	}
}

// LivePreview implements generation.LivePreviewer: the latest partial
// image of the call of generation id, made small.
func (p *Provider) LivePreview(generationID string) ([]byte, int, bool) {
	p.live.mu.Lock()
	defer p.live.mu.Unlock()
	f, ok := p.live.m[generationID]
	if !ok || f.jpeg == nil {
		return nil, 0, false
	}
	return bytes.Clone(f.jpeg), f.frames, true
}

// partial returns what takes one partial event's data of the call of
// generation id: its image, decoded within package preview's budget and
// made small. A partial that cannot be read is skipped: it only
// decorates.
func (p *Provider) partial(id, mime string) func(io.Reader) {
	return func(r io.Reader) {
		sc := syncjob.NewScanner(io.LimitReader(r, maxPartialBytes), []string{"b64_json"}, nil)
		_, v, err := sc.Next()
		if err != nil {
			return
		}
		small, err := preview.Make(base64.NewDecoder(base64.StdEncoding, v), mime)
		if err == nil {
			p.live.set(id, small.Data)
		}
	}
}

// sseFilter reads a streamed reply's events and yields only the data of
// those that are not partial images (the completed event's JSON, an error
// event's), for the reply's scanner; each partial image's data goes to
// partial instead. Lines are streamed, never held whole: a completed
// event's data line is the whole image in base64.
type sseFilter struct {
	br      *bufio.Reader
	partial func(io.Reader)
	event   string
	pass    *restOfLine // the data line being passed through
}

func newSSEFilter(r io.Reader, partial func(io.Reader)) *sseFilter {
	return &sseFilter{br: bufio.NewReaderSize(r, 64<<10), partial: partial}
}

func (f *sseFilter) Read(p []byte) (int, error) {
	for {
		if f.pass != nil {
			n, err := f.pass.Read(p)
			if err == io.EOF {
				f.pass = nil
				if n > 0 {
					return n, nil
				}
				continue
			}
			return n, err
		}
		name, eol, err := f.field()
		if err != nil {
			return 0, err
		}
		rest := &restOfLine{br: f.br, done: eol}
		switch {
		case name == "" && eol:
			f.event = "" // a blank line ends an event
			continue
		case name == "event":
			v, _ := io.ReadAll(io.LimitReader(rest, 128))
			f.event = strings.TrimSpace(string(v))
		case name == "data" && strings.HasSuffix(f.event, ".partial_image"):
			f.partial(rest)
		case name == "data":
			f.pass = rest
			continue
		}
		if _, err := io.Copy(io.Discard, rest); err != nil {
			return 0, err
		}
	}
}

// field reads a line's field name: up to ':' (and the one space after
// it), or to the line's end (eol).
func (f *sseFilter) field() (name string, eol bool, err error) {
	var b []byte
	for len(b) < 64 {
		c, err := f.br.ReadByte()
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				return string(b), true, nil
			}
			return "", true, err
		}
		switch c {
		case '\n':
			return strings.TrimSuffix(string(b), "\r"), true, nil
		case ':':
			if nx, err := f.br.Peek(1); err == nil && nx[0] == ' ' {
				_, _ = f.br.ReadByte()
			}
			return string(b), false, nil
		}
		b = append(b, c)
	}
	return string(b), false, nil // no field of ours: the rest is skipped
}

// restOfLine reads the rest of the current line, without its '\n'.
type restOfLine struct {
	br   *bufio.Reader
	done bool
}

func (l *restOfLine) Read(p []byte) (int, error) {
	if l.done || len(p) == 0 {
		if l.done {
			return 0, io.EOF
		}
		return 0, nil
	}
	if l.br.Buffered() == 0 {
		if _, err := l.br.Peek(1); err != nil {
			l.done = true
			if err == io.EOF {
				return 0, io.EOF
			}
			return 0, err
		}
	}
	buf, _ := l.br.Peek(min(l.br.Buffered(), len(p)))
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		n := copy(p, buf[:i])
		_, _ = l.br.Discard(i + 1)
		l.done = true
		return n, nil
	}
	n := copy(p, buf)
	_, _ = l.br.Discard(n)
	return n, nil
}
