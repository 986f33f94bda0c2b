// Package netx holds darkroom's one definition of a loopback address.
package netx

import (
	"net"
	"net/netip"
	"strings"
)

// Loopback reports whether addr (a host, or host:port, IPv6 in brackets
// or not) is loopback: "localhost" exactly, or an IP literal netip calls
// loopback. It is go-sdk's own
// definition (its DNS-rebinding guard), so that darkroom's door and
// go-sdk never disagree on a Host; darkroom's other loopback rules (bind
// without auth, Origin, the metrics listener) use it too, and a name
// that is not an IP literal may resolve anywhere, so it is not loopback.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
