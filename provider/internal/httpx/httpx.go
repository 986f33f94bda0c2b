// Package httpx is the HTTP plumbing shared by the Replicate and fal
// adapters: authenticated JSON requests, an outbound rate limiter per
// credential, bounded reads, and the mapping of HTTP outcomes onto
// provider.RetryableError / provider.PermanentError.
package httpx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Class selects the rate limit bucket of a request.
type Class int

const (
	// Create is a request that starts a job (Replicate limits these
	// separately).
	Create Class = iota
	// Other is every other request.
	Other
)

// ErrNotSent marks a failure before the request left this process (rate
// limit wait too long, refused connection).
var ErrNotSent = errors.New("request not sent")

// MaxBody bounds an API response body.
const MaxBody = 16 << 20

// Config configures a Client.
type Config struct {
	// Provider names the provider in error messages ("replicate").
	Provider string
	// AuthValue is the Authorization header value ("Bearer ...", "Key ...").
	AuthValue string
	// AuthHeader is the header AuthValue goes in (default Authorization;
	// Gemini's is x-goog-api-key).
	AuthHeader string
	// HTTPClient sends the requests; nil means a client with Timeout.
	HTTPClient *http.Client
	// Timeout bounds one request (default 30 s) when HTTPClient is nil.
	Timeout time.Duration
	// PerMinute is the rate per class (0: no limit). Limiters are shared
	// by every Client with the same credential, so two adapters on one
	// token share one budget.
	PerMinute map[Class]int
	// MaxWait is the longest a request waits for the limiter; beyond it
	// the request fails at once with a RetryableError carrying the wait.
	// Zero means 2 s; negative means never wait.
	MaxWait time.Duration
	// Now is the clock for the limiter; nil means time.Now.
	Now func() time.Time
	// UserAgent is sent with every request.
	UserAgent string
}

// Client sends authenticated JSON requests.
type Client struct {
	cfg      Config
	hc       *http.Client
	limiters map[Class]*rate.Limiter
}

// New builds a Client.
func New(cfg Config) *Client {
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "darkroom"
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	c := &Client{cfg: cfg, hc: hc, limiters: map[Class]*rate.Limiter{}}
	for class, n := range cfg.PerMinute {
		if n > 0 {
			c.limiters[class] = sharedLimiter(cfg.Provider, cfg.AuthValue, class, n)
		}
	}
	return c
}

var (
	limMu    sync.Mutex
	limiters = map[string]*rate.Limiter{}
)

// sharedLimiter returns the process-wide limiter for one credential and
// class. The burst is a tenth of the per-minute budget (Replicate allows
// bursts), at least 1.
func sharedLimiter(prov, cred string, class Class, perMinute int) *rate.Limiter {
	h := sha256.Sum256([]byte(prov + "\x00" + cred))
	key := fmt.Sprintf("%s/%d/%d", hex.EncodeToString(h[:8]), class, perMinute)
	limMu.Lock()
	defer limMu.Unlock()
	if l, ok := limiters[key]; ok {
		return l
	}
	l := rate.NewLimiter(rate.Limit(float64(perMinute)/60), max(perMinute/10, 1))
	limiters[key] = l
	return l
}

// Response is a fully read HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends one request. body, when non-nil, is sent as JSON. It returns
// the response whatever its status; err is a transport failure, already a
// *provider.RetryableError (wrapping ErrNotSent when nothing was sent),
// or the context's error.
func (c *Client) Do(ctx context.Context, class Class, method, url string, body any, hdr http.Header) (*Response, error) {
	if err := c.wait(ctx, class); err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s: encode request: %w", c.cfg.Provider, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.cfg.Provider, err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	return c.readAll(ctx, resp, method)
}

// send adds the credential and common headers and sends req; a
// transport failure is a RetryableError (wrapping ErrNotSent when the
// connection was never made).
func (c *Client) send(ctx context.Context, req *http.Request) (*http.Response, error) {
	if c.cfg.AuthValue != "" {
		req.Header.Set(cmpOr(c.cfg.AuthHeader, "Authorization"), c.cfg.AuthValue)
	}
	if req.Header.Get("Accept") == "" { // a stream asks for text/event-stream
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		err = fmt.Errorf("%s: %s %s: %w", c.cfg.Provider, req.Method, redact(req.URL.String()), err)
		if isDialError(err) {
			err = fmt.Errorf("%w (%w)", err, ErrNotSent)
		}
		return nil, &provider.RetryableError{Err: err}
	}
	return resp, nil
}

func cmpOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// Open sends one request like Do, its body streamed from body (of
// contentType), and leaves a 2xx reply's body open for the caller to
// stream and close (stream); any other reply is read whole (r), as Do's.
func (c *Client) Open(ctx context.Context, class Class, method, url string, body io.Reader, contentType string, hdr http.Header) (stream *http.Response, r *Response, err error) {
	if err := c.wait(ctx, class); err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.cfg.Provider, err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.send(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil, nil
	}
	r, err = c.readAll(ctx, resp, method)
	return nil, r, err
}

func (c *Client) readAll(ctx context.Context, resp *http.Response, method string) (*Response, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &provider.RetryableError{Err: fmt.Errorf("%s: read %s reply: %w", c.cfg.Provider, method, err)}
	}
	if len(b) > MaxBody {
		return nil, &provider.RetryableError{Err: fmt.Errorf("%s: reply larger than %d bytes", c.cfg.Provider, MaxBody)}
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// redact drops the query (it may carry webhook URLs) from a URL for logs.
func redact(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

func (c *Client) wait(ctx context.Context, class Class) error {
	l := c.limiters[class]
	if l == nil {
		return nil
	}
	now := c.cfg.Now()
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return &provider.RetryableError{Err: fmt.Errorf("%s: outbound rate limit: %w", c.cfg.Provider, ErrNotSent), After: time.Second}
	}
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	if c.cfg.MaxWait < 0 || d > c.cfg.MaxWait {
		r.CancelAt(now)
		return &provider.RetryableError{Err: fmt.Errorf("%s: outbound rate limit reached: %w", c.cfg.Provider, ErrNotSent), After: d}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.CancelAt(c.cfg.Now())
		return ctx.Err()
	}
}

// OK reports a 2xx status.
func (r *Response) OK() bool { return r.Status >= 200 && r.Status < 300 }

// Err maps a non-2xx response onto darkroom's error vocabulary:
//
//	429               RetryableError{After: RetryAfter, else the body's hint}
//	5xx               RetryableError (After from Retry-After when present)
//	404               provider.ErrNotFound
//	400 401 403 422…  PermanentError with the provider's message
//
// It returns nil for a 2xx response.
func (c *Client) Err(r *Response) error {
	if r.OK() {
		return nil
	}
	msg := Message(r.Body)
	now := c.cfg.Now()
	switch {
	case r.Status == http.StatusTooManyRequests:
		after := RetryAfter(r.Header, now)
		if after == 0 {
			after = hintedWait(msg)
		}
		if after == 0 {
			after = 10 * time.Second
		}
		return &provider.RetryableError{Err: fmt.Errorf("%s: throttled (429): %s", c.cfg.Provider, orStatus(msg, r.Status)), After: after}
	case r.Status >= 500:
		return &provider.RetryableError{Err: fmt.Errorf("%s: server error (%d): %s", c.cfg.Provider, r.Status, orStatus(msg, r.Status)), After: RetryAfter(r.Header, now)}
	case r.Status == http.StatusNotFound:
		return fmt.Errorf("%s: %w: %s", c.cfg.Provider, provider.ErrNotFound, orStatus(msg, r.Status))
	case r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden:
		return &provider.PermanentError{Message: fmt.Sprintf("%s refused our credentials (%d): %s", c.cfg.Provider, r.Status, orStatus(msg, r.Status))}
	case r.Status == http.StatusRequestTimeout:
		return &provider.RetryableError{Err: fmt.Errorf("%s: request timeout (408)", c.cfg.Provider)}
	default:
		return &provider.PermanentError{Message: fmt.Sprintf("%s rejected the request (%d): %s", c.cfg.Provider, r.Status, orStatus(msg, r.Status))}
	}
}

func orStatus(msg string, status int) string {
	if msg != "" {
		return msg
	}
	return http.StatusText(status)
}

// RetryAfter is the wait a reply asks for: Retry-After-Ms (OpenAI's,
// milliseconds; openai-go v3.105.0 internal/requestconfig reads it before
// Retry-After), else Retry-After (delay seconds or an HTTP date); 0 when
// absent, unparsable or beyond a day.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get("Retry-After-Ms")), 64); err == nil && ms > 0 && ms <= 24*3600*1000 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n <= 0 || n > 24*3600 {
			return 0
		}
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 && d <= 24*time.Hour {
			return d
		}
	}
	return 0
}

var hintRE = regexp.MustCompile(`(?i)expected available in (\d{1,5}) seconds?\b`)

// hintedWait reads the wait in Replicate's 429 body, "Request was
// throttled. Expected available in 1 second." (its rate limits page,
// replicate.com/docs/topics/predictions/rate-limits, read 2026-12-07).
func hintedWait(msg string) time.Duration {
	m := hintRE.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return time.Duration(n) * time.Second
}

// Message extracts a human message from an error body: the "detail"
// (string, or FastAPI-style list of {loc,msg}), "error", "message" or
// "title" field, else the start of the text. It is at most 500 bytes.
func Message(body []byte) string {
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		return clip(strings.TrimSpace(string(body)), 200)
	}
	for _, k := range []string{"detail", "error", "message", "title"} {
		if s := Text(v[k]); s != "" {
			return clip(s, 500)
		}
	}
	return ""
}

// Text renders a JSON error value as text: strings as they are, lists of
// {loc,msg} joined, objects by their message/msg/detail field.
func Text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(x)
	case []any:
		var parts []string
		for _, e := range x {
			if s := Text(e); s != "" {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, "; ")
	case map[string]any:
		msg := ""
		for _, k := range []string{"msg", "message", "detail", "error"} {
			if s, ok := x[k].(string); ok && s != "" {
				msg = s
				break
			}
		}
		if msg == "" {
			b, _ := json.Marshal(x)
			return string(b)
		}
		if loc, ok := x["loc"].([]any); ok && len(loc) > 0 {
			var ps []string
			for _, l := range loc {
				ps = append(ps, fmt.Sprint(l))
			}
			return strings.Join(ps, ".") + ": " + msg
		}
		return msg
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// SubmitErr adjusts an error from a job-creating request: a failure known
// to have created nothing (not sent, 429) wraps provider.ErrNotCreated so
// the runner may resubmit without reconciling first.
func SubmitErr(err error, r *Response) error {
	var re *provider.RetryableError
	if !errors.As(err, &re) {
		return err
	}
	if errors.Is(err, ErrNotSent) || (r != nil && r.Status == http.StatusTooManyRequests) {
		return &provider.RetryableError{Err: fmt.Errorf("%w: %w", provider.ErrNotCreated, re.Err), After: re.After}
	}
	return err
}

// SameOrigin reports whether u has the scheme and host of base; adapters
// only follow provider-returned URLs (fal's status_url, Replicate's next
// page) that stay on the API origin, so the credential never leaves it.
func SameOrigin(base, u string) bool {
	bs, bh, ok1 := origin(base)
	us, uh, ok2 := origin(u)
	return ok1 && ok2 && strings.EqualFold(bs, us) && strings.EqualFold(bh, uh)
}

func origin(s string) (scheme, host string, ok bool) {
	scheme, rest, found := strings.Cut(s, "://")
	if !found || scheme == "" {
		return "", "", false
	}
	host = rest
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if host == "" || strings.Contains(host, "@") {
		return "", "", false
	}
	return scheme, host, true
}

// Limit bounds a streamed 2xx body as readAll bounds a whole one.
func Limit(resp *http.Response) io.Reader { return io.LimitReader(resp.Body, MaxBody) }
