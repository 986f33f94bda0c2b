package limit

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// IPOptions say whether to believe X-Forwarded-For.
type IPOptions struct {
	// TrustForwardedFor makes ClientIP read X-Forwarded-For. Enable it only
	// behind a reverse proxy that sets the header; anyone can forge it.
	TrustForwardedFor bool
	// TrustedProxies, when set, limits trust to requests whose RemoteAddr is
	// in one of these prefixes, and skips these addresses when walking
	// X-Forwarded-For from the right. When empty (and TrustForwardedFor is
	// set), exactly one proxy hop is trusted: the rightmost entry is used.
	TrustedProxies []netip.Prefix
}

// ClientIP returns the host part of r.RemoteAddr; X-Forwarded-For is ignored.
func ClientIP(r *http.Request) string { return IPOptions{}.ClientIP(r) }

// ClientIP returns the client address of r according to o.
func (o IPOptions) ClientIP(r *http.Request) string {
	remote := hostOnly(r.RemoteAddr)
	if !o.TrustForwardedFor {
		return remote
	}
	if len(o.TrustedProxies) > 0 && !o.trusted(remote) {
		return remote
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for h := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	client := remote
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			break // garbage: stop at the last address we could verify
		}
		client = a.Unmap().String()
		if len(o.TrustedProxies) == 0 || !o.trusted(client) {
			break
		}
	}
	return client
}

func (o IPOptions) trusted(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, p := range o.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func hostOnly(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return host
}

// IPKey turns a client IP into a pre-auth limiter key: IPv4 addresses as they
// are, IPv6 addresses by their /64 prefix (one subscriber usually holds a
// whole /64, so per-address keys would let a single client rotate freely).
// Anything unparsable is returned unchanged.
func IPKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// PreAuthMiddleware throttles requests per client IP before authentication,
// answering 429 with a JSON-RPC error (id null) when c denies.
func PreAuthMiddleware(c Class, o IPOptions) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ok, d := c.Allow(IPKey(o.ClientIP(r)), c.Rate, c.Burst); !ok {
				WriteHTTP(w, nil, d)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
