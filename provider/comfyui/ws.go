package comfyui

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/provider"
)

// Progress over ComfyUI's websocket (/ws?clientId=, server.py
// websocket_handler; the events of execution.py and main.py):
//
//   - text frames {"type", "data"}: status (first, with sid), executing
//     {node, prompt_id} (node null: the prompt ended), progress {value,
//     max, prompt_id, node}, executed, execution_start, execution_success,
//     execution_error, execution_interrupted, execution_cached.
//   - binary frames: a 4-byte big-endian event type, then for 1
//     (PREVIEW_IMAGE) a 4-byte image type (1 JPEG, 2 PNG) and the image,
//     for 4 (PREVIEW_IMAGE_WITH_METADATA, sent to a client whose first
//     message declared supports_preview_metadata) a 4-byte length, that
//     much JSON (prompt_id, node_id, image_type) and the image; 3 is
//     progress text, ignored.
//
// A preview frame becomes the running prompt's preview (package preview
// makes it small, at most one a second a prompt); it is never an output.
// The socket only adds detail: every state is also read by polling.

// Bounds of what the socket keeps.
const (
	maxFrameBytes = 8 << 20 // a frame larger is not read
	maxLive       = 512     // prompts followed at once
	previewEvery  = time.Second
)

// live is what the socket said of one prompt.
type live struct {
	value, max int
	node       string
	preview    []byte // the latest frame, made small
	frames     int
	previewAt  time.Time
	at         time.Time
	ours       string // darkroom's prompt id, where the backend minted this one
}

// liveSet is the live state of the prompts this process follows.
type liveSet struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*live
	// ours maps darkroom's prompt id to the id a backend too old to keep
	// it minted; an entry lives as long as that prompt's in m.
	ours map[string]string
}

func newLiveSet(now func() time.Time) *liveSet {
	return &liveSet{now: now, m: map[string]*live{}, ours: map[string]string{}}
}

// trackAs follows prompt id, which darkroom knows as ours (empty or the
// same: the backend kept darkroom's id).
func (s *liveSet) trackAs(id, ours string) {
	s.track(id)
	if ours == "" || ours == id {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.m[id]; ok {
		l.ours = ours
		s.ours[ours] = id
	}
}

// track starts following a prompt (the oldest followed is dropped past
// maxLive).
func (s *liveSet) track(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; ok {
		return
	}
	if len(s.m) >= maxLive {
		var oldest string
		var at time.Time
		for k, l := range s.m {
			if oldest == "" || l.at.Before(at) {
				oldest, at = k, l.at
			}
		}
		s.drop(oldest)
	}
	s.m[id] = &live{at: s.now()}
}

func (s *liveSet) forget(id string) {
	s.mu.Lock()
	s.drop(id)
	s.mu.Unlock()
}

// drop forgets prompt id and its alias; s.mu is held.
func (s *liveSet) drop(id string) {
	if l, ok := s.m[id]; ok && l.ours != "" {
		delete(s.ours, l.ours)
	}
	delete(s.m, id)
}

// get is what the socket said of prompt id, asked by its own id or by
// darkroom's where the backend minted another.
func (s *liveSet) get(id string) (live, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if minted, ok := s.ours[id]; ok {
		id = minted
	}
	l, ok := s.m[id]
	if !ok {
		return live{}, false
	}
	return *l, true
}

// update changes a followed prompt (nothing for one not followed).
func (s *liveSet) update(id string, f func(l *live)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.m[id]; ok {
		f(l)
		l.at = s.now()
	}
}

// wantsPreview reports whether a frame for id is to be made now.
func (s *liveSet) wantsPreview(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.m[id]
	return ok && (l.preview == nil || s.now().Sub(l.previewAt) >= previewEvery)
}

// watcher holds one backend's websocket, reconnecting with backoff.
type watcher struct {
	p *Provider
	b *backend

	mu        sync.Mutex
	connected bool
	current   string        // the prompt the last event named
	changed   chan struct{} // closed (and replaced) at each frame and at a (dis)connect
	last      frame         // the latest frame
}

// frame is what the latest text frame was about.
type frame struct {
	kind   string // the event type
	prompt string // the prompt it names ("" none)
}

// wait is the channel closed at the next frame (or (dis)connect).
func (w *watcher) wait() (<-chan struct{}, frame, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed, w.last, w.connected
}

func (w *watcher) wake(f frame) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = f
	if w.changed != nil {
		close(w.changed)
	}
	w.changed = make(chan struct{})
}

// Connected reports whether the socket is open.
func (w *watcher) Connected() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.connected
}

func (w *watcher) run(ctx context.Context) {
	wait := time.Second
	for ctx.Err() == nil {
		err := w.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			wait = time.Second
		}
		w.p.cfg.Logger.Debug("comfyui: websocket closed; polling meanwhile", "backend", w.b.host, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// session is one connection, read until it breaks.
func (w *watcher) session(ctx context.Context) error {
	u := "ws" + strings.TrimPrefix(w.b.origin, "http") + "/ws?clientId=" + w.p.clientID
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, _, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPHeader: w.p.header.Clone(), HTTPClient: w.p.cfg.HTTPClient})
	cancel()
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxFrameBytes)
	hello, _ := json.Marshal(map[string]any{"type": "feature_flags", "data": map[string]any{"supports_preview_metadata": true}})
	if err := conn.Write(ctx, websocket.MessageText, hello); err != nil {
		return err
	}
	w.mu.Lock()
	w.connected = true
	w.mu.Unlock()
	w.wake(frame{kind: "open"})
	defer func() {
		w.mu.Lock()
		w.connected = false
		w.mu.Unlock()
		w.wake(frame{kind: "closed"})
	}()
	for {
		typ, b, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		if typ == websocket.MessageText {
			w.text(b)
		} else {
			w.binary(b)
		}
		if f := w.p.onFrame; f != nil {
			f()
		}
	}
}

func (w *watcher) text(b []byte) {
	var m struct {
		Type string `json:"type"`
		Data struct {
			PromptID string `json:"prompt_id"`
			Node     any    `json:"node"`
			Value    int    `json:"value"`
			Max      int    `json:"max"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &m) != nil {
		return
	}
	defer w.wake(frame{kind: m.Type, prompt: m.Data.PromptID})
	if m.Data.PromptID == "" {
		return
	}
	id := m.Data.PromptID
	node, _ := m.Data.Node.(string)
	switch m.Type {
	case "executing", "execution_start", "execution_cached":
		w.setCurrent(id)
		if node != "" {
			w.p.live.update(id, func(l *live) { l.node = node })
		}
	case "progress":
		w.setCurrent(id)
		w.p.live.update(id, func(l *live) {
			l.value, l.max = m.Data.Value, m.Data.Max
			if node != "" {
				l.node = node
			}
		})
	}
}

func (w *watcher) setCurrent(id string) {
	w.mu.Lock()
	w.current = id
	w.mu.Unlock()
}

// binary reads a preview frame and keeps it as its prompt's preview.
func (w *watcher) binary(b []byte) {
	if len(b) < 8 {
		return
	}
	var id, mime string
	var img []byte
	switch binary.BigEndian.Uint32(b) {
	case 1: // PREVIEW_IMAGE: image type, image
		w.mu.Lock()
		id = w.current
		w.mu.Unlock()
		mime = map[uint32]string{1: "image/jpeg", 2: "image/png"}[binary.BigEndian.Uint32(b[4:])]
		img = b[8:]
	case 4: // PREVIEW_IMAGE_WITH_METADATA: length, metadata, image
		n := binary.BigEndian.Uint32(b[4:])
		if uint64(n) > uint64(len(b)-8) {
			return
		}
		var meta struct {
			PromptID  string `json:"prompt_id"`
			ImageType string `json:"image_type"`
		}
		if json.Unmarshal(b[8:8+n], &meta) != nil {
			return
		}
		id, mime, img = meta.PromptID, meta.ImageType, b[8+n:]
	default:
		return
	}
	if id == "" {
		return
	}
	w.p.live.update(id, func(l *live) { l.frames++ })
	if !preview.Supported(mime) || !w.p.live.wantsPreview(id) {
		return
	}
	small, err := preview.Make(bytes.NewReader(img), mime)
	if err != nil {
		return
	}
	w.p.live.update(id, func(l *live) {
		l.preview, l.previewAt = small.Data, w.p.live.now()
	})
}

// Connected reports whether the websocket of every backend is open (for
// tests and readiness detail).
func (p *Provider) Connected() bool {
	p.start()
	for _, b := range p.backends {
		if b.ws == nil || !b.ws.Connected() {
			return false
		}
	}
	return true
}

// watchStall is how long Watch waits without a frame from the backend
// before it says the stream stalled (a node may compute for long without
// a word: the caller then polls once and may watch again).
const watchStall = 2 * time.Minute

// Signal implements provider.Signaller: the websocket streams a prompt's
// changes (SignalStream); without it, polling.
func (p *Provider) Signal(m provider.Model, webhook bool) provider.Signal {
	if p.cfg.NoWebsocket {
		return provider.SignalPoll
	}
	return provider.SignalStream
}

// Watch implements provider.Watcher over the backend's websocket: each
// progress event of the prompt is handed to progress (read from the
// socket, no call), and each event that may end it (its own success,
// error or interruption, and every queue change the backend broadcasts:
// the only word a prompt queued by another process gets) is checked with
// Status, until Status says it ended. A socket that is not open, or
// closes, ends it with provider.ErrStreamEnded; no frame for watchStall
// with provider.ErrStreamStalled.
func (p *Provider) Watch(ctx context.Context, job provider.Job, progress func(provider.Status)) (provider.Status, error) {
	b, _, err := p.backendOf(job)
	if err != nil {
		return provider.Status{}, err
	}
	p.start()
	if b.ws == nil {
		return provider.Status{}, provider.ErrStreamEnded
	}
	var last provider.Status
	stall := time.NewTimer(watchStall)
	defer stall.Stop()
	check := true
	for {
		changed, _, open := b.ws.wait()
		if !open {
			return last, provider.ErrStreamEnded
		}
		if check {
			st, err := p.Status(ctx, job)
			if err != nil {
				return last, err
			}
			if st.State.Terminal() {
				return st, nil
			}
			if progress != nil && (st.State != last.State || st.Progress != last.Progress || st.Message != last.Message) {
				progress(st)
			}
			last = st
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-stall.C:
			return last, provider.ErrStreamStalled
		case <-changed:
		}
		stall.Reset(watchStall)
		_, f, _ := b.ws.wait()
		check = f.prompt != job.ID || f.kind != "progress"
		if !check && progress != nil {
			if st, ok := p.running(b, job.ID); ok && st.Progress > last.Progress {
				progress(st)
				last = st
			}
		}
	}
}
