package limit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// TrustedProxies are the peers whose forwarding headers (X-Forwarded-For,
// Forwarded) are believed: DARKROOM_TRUSTED_PROXIES. Empty trusts no one,
// and the client address is always the TCP peer.
type TrustedProxies []netip.Prefix

// ParseTrustedProxies reads a comma- or space-separated list of CIDR
// prefixes ("10.0.0.0/8", "2001:db8::/32") and addresses ("192.0.2.7",
// "::1"; one address is a /32 or /128). IPv4-mapped IPv6 forms are taken
// as IPv4. Anything else is an error naming the entry.
func ParseTrustedProxies(s string) (TrustedProxies, error) {
	var out TrustedProxies
	var errs []error
	for f := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		p, err := parseProxy(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

func parseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("trusted proxy %q: want an address or CIDR prefix", s)
		}
		a, bits := p.Addr(), p.Bits()
		if a.Is4In6() {
			if bits < 96 {
				return netip.Prefix{}, fmt.Errorf("trusted proxy %q: an IPv4-mapped prefix needs at least 96 bits", s)
			}
			a, bits = a.Unmap(), bits-96
		}
		return netip.PrefixFrom(a, bits).Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("trusted proxy %q: want an address or CIDR prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Trusts reports whether a is a trusted proxy.
func (t TrustedProxies) Trusts(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP returns the client address of r. It is the TCP peer unless the
// peer is a trusted proxy; then it is the right-most address of the
// forwarding chain that is not a trusted proxy (trusted proxies append
// what they saw, so everything left of that is the client's to forge).
// X-Forwarded-For and Forwarded "for=" are both read (every header line,
// in order; IPv6 with or without brackets, ports, quoted values). The
// peer is used when the walk meets anything that is not an address
// ("unknown", obfuscated names, garbage) before an untrusted one, when
// neither header is present, and when both are present and disagree (a
// proxy that writes one header passes the other through untouched, so
// one of them is the client's own). When every hop is trusted, the
// left-most is the client.
func (t TrustedProxies) ClientIP(r *http.Request) string {
	peer, ok := parseNode(r.RemoteAddr)
	if !ok {
		return hostOnly(r.RemoteAddr)
	}
	if !t.Trusts(peer) {
		return peer.String()
	}
	xff, hasXFF := t.walk(peer, xffHops(r.Header.Values("X-Forwarded-For")))
	fwd, hasFwd := t.walk(peer, forwardedHops(r.Header.Values("Forwarded")))
	switch {
	case hasXFF && hasFwd && xff != fwd:
		return peer.String()
	case hasXFF:
		return xff.String()
	case hasFwd:
		return fwd.String()
	}
	return peer.String()
}

// walk goes right to left through hops (nil: the header is absent)
// skipping trusted proxies. An unparsable hop (shown as "") gives peer.
func (t TrustedProxies) walk(peer netip.Addr, hops []string) (netip.Addr, bool) {
	if hops == nil {
		return netip.Addr{}, false
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseNode(hops[i])
		if !ok {
			return peer, true
		}
		client = a
		if !t.Trusts(a) {
			break
		}
	}
	return client, true
}

// xffHops splits X-Forwarded-For lines into hops; nil when absent.
func xffHops(lines []string) []string {
	if len(lines) == 0 {
		return nil
	}
	hops := []string{}
	for _, v := range lines {
		for h := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	return hops
}

// forwardedHops returns the for= node of each RFC 7239 forwarded-element
// of the Forwarded lines (unquoted), "" for an element without exactly
// one for= or that does not parse; nil when absent.
func forwardedHops(lines []string) []string {
	if len(lines) == 0 {
		return nil
	}
	hops := []string{}
	for _, v := range lines {
		for _, el := range splitQuoted(v, ',') {
			node, n := "", 0
			for _, pair := range splitQuoted(el, ';') {
				k, val, found := strings.Cut(strings.TrimSpace(pair), "=")
				if !found && strings.TrimSpace(pair) == "" {
					continue
				}
				if !strings.EqualFold(strings.TrimSpace(k), "for") {
					continue
				}
				n++
				var ok bool
				if node, ok = unquote(strings.TrimSpace(val)); !ok {
					node = ""
				}
			}
			if n != 1 {
				node = ""
			}
			hops = append(hops, node)
		}
	}
	return hops
}

// splitQuoted splits s at sep outside double-quoted strings (with
// backslash escapes). An unterminated quote leaves the rest as one part.
func splitQuoted(s string, sep byte) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// unquote returns a token as is and a quoted-string's content; false for
// a malformed quoted-string.
func unquote(v string) (string, bool) {
	if !strings.HasPrefix(v, `"`) {
		return v, !strings.ContainsAny(v, "\"\\")
	}
	if len(v) < 2 || !strings.HasSuffix(v, `"`) {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		c := v[i]
		if c == '"' {
			return "", false
		}
		if c == '\\' {
			if i++; i >= len(v)-1 {
				return "", false
			}
			c = v[i]
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// parseNode reads an address with or without a port or brackets
// ("192.0.2.1", "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]",
// "[2001:db8::1]:443"), unmapped and without zone.
func parseNode(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
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
