// Package fetch downloads provider output files under a strict policy, so
// a URL in a provider's reply cannot make darkroom reach anything else:
//
//   - https only (plain http only with Options.AllowHTTP, for tests);
//   - the host must match the provider's allowlist ("host" or "*.suffix");
//   - the connection may not go to a loopback, private, link-local,
//     unspecified, multicast or otherwise non-public address unless
//     Options.AllowPrivate is set. This is checked on the address actually
//     dialled (net.Dialer.Control), so DNS rebinding cannot slip past it;
//   - every redirect is checked against the same rules;
//   - no proxy from the environment is used (it would dial for us);
//   - the body is capped at Options.MaxBytes.
package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Policy violations; Open's errors wrap them.
var (
	ErrScheme         = errors.New("fetch: URL scheme not allowed")
	ErrHostNotAllowed = errors.New("fetch: host not in the provider's allowlist")
	ErrPrivateAddress = errors.New("fetch: address is not public")
	ErrTooLarge       = errors.New("fetch: file larger than the limit")
	ErrTooManyHops    = errors.New("fetch: too many redirects")
)

// Options configures a Fetcher.
type Options struct {
	// Hosts are the allowed host names: "example.com" matches exactly,
	// "*.example.com" matches any subdomain (not example.com itself).
	Hosts []string
	// AllowHTTP permits plain http (tests only).
	AllowHTTP bool
	// AllowPrivate permits loopback and private addresses (tests only).
	AllowPrivate bool
	// MaxBytes caps one file (default 2 GiB).
	MaxBytes int64
	// HeaderTimeout bounds the wait for response headers (default 30 s);
	// the body is bounded by the caller's context.
	HeaderTimeout time.Duration
	// MaxRedirects (default 5).
	MaxRedirects int
	// TLSConfig overrides the TLS client config (tests with a private CA).
	TLSConfig *tls.Config
}

// Fetcher opens output URLs. It is safe for concurrent use.
type Fetcher struct {
	opts   Options
	client *http.Client
}

// New builds a Fetcher.
func New(o Options) *Fetcher {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 2 << 30
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = 30 * time.Second
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = 5
	}
	f := &Fetcher{opts: o}
	d := &net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second, Control: f.control}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSClientConfig:       o.TLSConfig,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: o.HeaderTimeout,
		MaxIdleConns:          16,
		IdleConnTimeout:       60 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	f.client = &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= o.MaxRedirects {
				return ErrTooManyHops
			}
			if creds, _ := req.Context().Value(credKey{}).([]string); len(creds) > 0 && !strings.EqualFold(req.URL.Host, via[0].URL.Host) {
				// Go copies custom headers across hosts; a key must not.
				for _, k := range creds {
					req.Header.Del(k)
				}
			}
			return f.Check(req.URL)
		},
	}
	return f
}

// Check applies the scheme, host and literal-address rules to u.
func (f *Fetcher) Check(u *url.URL) error {
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && f.opts.AllowHTTP:
	default:
		return fmt.Errorf("%w: %q", ErrScheme, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%w: URL carries credentials", ErrHostNotAllowed)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if !HostAllowed(f.opts.Hosts, host) {
		return fmt.Errorf("%w: %q", ErrHostNotAllowed, host)
	}
	if a, err := netip.ParseAddr(host); err == nil && !f.opts.AllowPrivate && !Public(a) {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, a)
	}
	return nil
}

// HostAllowed matches host against patterns ("h" or "*.suffix").
func HostAllowed(patterns []string, host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return false
	}
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSpace(p))
		if suffix, ok := strings.CutPrefix(p, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if p == host {
			return true
		}
	}
	return false
}

// control runs on every dial, with the address actually connected to.
func (f *Fetcher) control(network, address string, _ syscall.RawConn) error {
	if f.opts.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable %q", ErrPrivateAddress, address)
	}
	if !Public(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, ap.Addr())
	}
	return nil
}

var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),  // documentation
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64 can reach private v4
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("fc00::/7"),       // unique local
}

// Public reports whether a is a globally routable unicast address.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		a.IsMulticast() || !a.IsGlobalUnicast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Open starts downloading rawURL and returns the body, capped at MaxBytes
// (reading past it fails with ErrTooLarge). The caller closes it.
// Errors: policy violations wrap the Err* values above; an HTTP error
// status is an *HTTPError.
func (f *Fetcher) Open(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	return f.OpenWith(ctx, rawURL, nil)
}

type credKey struct{}

// OpenWith is Open with credential headers (Gemini's x-goog-api-key for
// its file downloads): they go to the URL's own host and are dropped
// from any redirect to another host.
func (f *Fetcher) OpenWith(ctx context.Context, rawURL string, creds http.Header) (io.ReadCloser, error) {
	var names []string
	for k := range creds {
		names = append(names, k)
	}
	if len(names) > 0 {
		ctx = context.WithValue(ctx, credKey{}, names)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: bad URL", ErrHostNotAllowed)
	}
	if err := f.Check(u); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range creds {
		req.Header[k] = vs
	}
	req.Header.Set("User-Agent", "darkroom")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, &HTTPError{Status: resp.StatusCode, Host: resp.Request.URL.Host}
	}
	if resp.ContentLength > f.opts.MaxBytes {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %d bytes announced, limit %d", ErrTooLarge, resp.ContentLength, f.opts.MaxBytes)
	}
	return &capped{rc: resp.Body, left: f.opts.MaxBytes}, nil
}

// HTTPError is a non-200 answer from an output host.
type HTTPError struct {
	Status int
	Host   string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("fetch: %s answered %d", e.Host, e.Status)
}

type capped struct {
	rc   io.ReadCloser
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n - int(-c.left), ErrTooLarge
	}
	return n, err
}

func (c *capped) Close() error { return c.rc.Close() }

// ProviderError maps an Open error onto darkroom's vocabulary: policy
// violations and gone files (403, 404, 410: outputs expire at the
// provider) are permanent, everything else (5xx, network) retryable.
func ProviderError(name string, err error) error {
	if err == nil {
		return nil
	}
	var he *HTTPError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded) && !isTimeout(err):
		return err
	case errors.Is(err, ErrScheme), errors.Is(err, ErrHostNotAllowed), errors.Is(err, ErrPrivateAddress), errors.Is(err, ErrTooManyHops):
		return &provider.PermanentError{Message: fmt.Sprintf("%s returned an output URL darkroom will not fetch: %v", name, err)}
	case errors.Is(err, ErrTooLarge):
		return &provider.PermanentError{Message: fmt.Sprintf("%s output is too large: %v", name, err)}
	case errors.As(err, &he) && (he.Status == 403 || he.Status == 404 || he.Status == 410):
		return &provider.PermanentError{Message: fmt.Sprintf("%s output is no longer available (%d); outputs expire at the provider", name, he.Status)}
	default:
		return &provider.RetryableError{Err: fmt.Errorf("%s: download output: %w", name, err)}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
