package limit

import (
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseTrustedProxies(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{"  ", nil, ""},
		{"10.0.0.0/8", []string{"10.0.0.0/8"}, ""},
		{"10.1.2.3/8", []string{"10.0.0.0/8"}, ""}, // masked
		{"192.0.2.7", []string{"192.0.2.7/32"}, ""},
		{"::1", []string{"::1/128"}, ""},
		{"2001:db8::/32, 192.0.2.7 10.0.0.0/8", []string{"2001:db8::/32", "192.0.2.7/32", "10.0.0.0/8"}, ""},
		{"::ffff:192.0.2.7", []string{"192.0.2.7/32"}, ""},
		{"::ffff:10.0.0.0/104", []string{"10.0.0.0/8"}, ""},
		{"::ffff:0.0.0.0/8", nil, `"::ffff:0.0.0.0/8"`},
		{"10.0.0.0/33", nil, `"10.0.0.0/33"`},
		{"proxy.internal", nil, `"proxy.internal"`},
		{"fe80::1%eth0", nil, `"fe80::1%eth0"`},
		{"192.0.2.7:80", nil, `"192.0.2.7:80"`},
		{"10.0.0.0/8,nonsense,1.2.3.4/99", nil, `"nonsense"`},
	}
	for _, tt := range tests {
		got, err := ParseTrustedProxies(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTrustedProxies(%q) error = %v, want one naming %s", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseTrustedProxies(%q): %v", tt.in, err)
			continue
		}
		var gs []string
		for _, p := range got {
			gs = append(gs, p.String())
		}
		if !slices.Equal(gs, tt.want) {
			t.Errorf("ParseTrustedProxies(%q) = %v, want %v", tt.in, gs, tt.want)
		}
	}
}

func TestClientIP(t *testing.T) {
	proxies := TrustedProxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	type hdr struct{ name, value string }
	xff := func(vs ...string) []hdr {
		var out []hdr
		for _, v := range vs {
			out = append(out, hdr{"X-Forwarded-For", v})
		}
		return out
	}
	fwd := func(vs ...string) []hdr {
		var out []hdr
		for _, v := range vs {
			out = append(out, hdr{"Forwarded", v})
		}
		return out
	}
	tests := []struct {
		name    string
		remote  string
		headers []hdr
		proxies TrustedProxies
		want    string
	}{
		// The peer, as it is.
		{"v4", "203.0.113.9:5555", nil, nil, "203.0.113.9"},
		{"v6", "[2001:db8::1]:443", nil, nil, "2001:db8::1"},
		{"v6 zone", "[fe80::1%eth0]:443", nil, nil, "fe80::1"},
		{"v4-mapped", "[::ffff:203.0.113.9]:1", nil, nil, "203.0.113.9"},
		{"no port", "203.0.113.9", nil, nil, "203.0.113.9"},
		{"not an ip", "@", nil, nil, "@"},

		// No trusted proxies: forwarding headers never count.
		{"xff, nothing trusted", "10.0.0.1:1", xff("1.2.3.4"), nil, "10.0.0.1"},
		{"forwarded, nothing trusted", "10.0.0.1:1", fwd("for=1.2.3.4"), nil, "10.0.0.1"},
		// An untrusted peer cannot choose its address.
		{"xff from an untrusted peer", "198.51.100.1:1", xff("1.2.3.4"), proxies, "198.51.100.1"},
		{"forwarded from an untrusted peer", "198.51.100.1:1", fwd("for=1.2.3.4"), proxies, "198.51.100.1"},
		{"xff naming a trusted proxy from an untrusted peer", "198.51.100.1:1", xff("10.0.0.2"), proxies, "198.51.100.1"},

		// A trusted peer: right-most untrusted hop.
		{"xff one hop", "10.0.0.1:1", xff("1.2.3.4"), proxies, "1.2.3.4"},
		{"xff client prefix forged", "10.0.0.1:1", xff("6.6.6.6, 1.2.3.4"), proxies, "1.2.3.4"},
		{"xff trusted chain", "10.0.0.1:1", xff("6.6.6.6, 1.2.3.4, 10.0.0.7"), proxies, "1.2.3.4"},
		{"xff several lines", "10.0.0.1:1", xff("6.6.6.6", "1.2.3.4, 10.9.9.9"), proxies, "1.2.3.4"},
		{"xff no spaces", "10.0.0.1:1", xff("6.6.6.6,1.2.3.4"), proxies, "1.2.3.4"},
		{"xff v4 with port", "10.0.0.1:1", xff("1.2.3.4:5678"), proxies, "1.2.3.4"},
		{"xff v6", "10.0.0.1:1", xff("2001:db8::7"), proxies, "2001:db8::7"},
		{"xff v6 bracketed", "10.0.0.1:1", xff("[2001:db8::7]"), proxies, "2001:db8::7"},
		{"xff v6 with port", "10.0.0.1:1", xff("[2001:db8::7]:443"), proxies, "2001:db8::7"},
		{"xff v6 zone", "10.0.0.1:1", xff("fe80::7%eth0"), proxies, "fe80::7"},
		{"xff v4-mapped", "10.0.0.1:1", xff("::ffff:1.2.3.4"), proxies, "1.2.3.4"},
		{"xff v4-mapped trusted proxy skipped", "10.0.0.1:1", xff("1.2.3.4, ::ffff:10.0.0.3"), proxies, "1.2.3.4"},
		{"xff v6 trusted proxy skipped", "[2001:db8:ffff::1]:1", xff("1.2.3.4, 2001:db8:ffff::2"), proxies, "1.2.3.4"},
		{"xff all trusted: left-most", "10.0.0.1:1", xff("10.0.0.9, 10.0.0.8"), proxies, "10.0.0.9"},
		{"xff garbage", "10.0.0.1:1", xff("nonsense"), proxies, "10.0.0.1"},
		{"xff garbage right of the client", "10.0.0.1:1", xff("1.2.3.4, nonsense"), proxies, "10.0.0.1"},
		{"xff garbage left of the client", "10.0.0.1:1", xff("nonsense, 1.2.3.4"), proxies, "1.2.3.4"},
		{"xff empty hop", "10.0.0.1:1", xff("1.2.3.4,"), proxies, "10.0.0.1"},
		{"xff empty", "10.0.0.1:1", xff(""), proxies, "10.0.0.1"},
		{"xff host name", "10.0.0.1:1", xff("client.example"), proxies, "10.0.0.1"},
		{"xff absent", "10.0.0.1:1", nil, proxies, "10.0.0.1"},

		// Forwarded (RFC 7239).
		{"forwarded", "10.0.0.1:1", fwd("for=192.0.2.60;proto=http;by=203.0.113.43"), proxies, "192.0.2.60"},
		{"forwarded case", "10.0.0.1:1", fwd("For=192.0.2.60"), proxies, "192.0.2.60"},
		{"forwarded quoted v6 with port", "10.0.0.1:1", fwd(`for="[2001:db8:cafe::17]:4711"`), proxies, "2001:db8:cafe::17"},
		{"forwarded quoted v6", "10.0.0.1:1", fwd(`for="[2001:db8:cafe::17]"`), proxies, "2001:db8:cafe::17"},
		{"forwarded quoted v4", "10.0.0.1:1", fwd(`for="192.0.2.60"`), proxies, "192.0.2.60"},
		{"forwarded escaped quote", "10.0.0.1:1", fwd(`for="192.0.2.\60"`), proxies, "192.0.2.60"},
		{"forwarded chain", "10.0.0.1:1", fwd("for=6.6.6.6, for=192.0.2.60;proto=https, for=10.0.0.7"), proxies, "192.0.2.60"},
		{"forwarded lines", "10.0.0.1:1", fwd("for=6.6.6.6", "for=192.0.2.60, for=10.0.0.7"), proxies, "192.0.2.60"},
		{"forwarded comma inside quotes", "10.0.0.1:1", fwd(`for=192.0.2.60;ext="a,for=6.6.6.6"`), proxies, "192.0.2.60"},
		{"forwarded semicolon inside quotes", "10.0.0.1:1", fwd(`for=192.0.2.60;ext="a;for=6.6.6.6"`), proxies, "192.0.2.60"},
		{"forwarded unknown", "10.0.0.1:1", fwd("for=6.6.6.6, for=unknown"), proxies, "10.0.0.1"},
		{"forwarded obfuscated", "10.0.0.1:1", fwd(`for="_gazonk"`), proxies, "10.0.0.1"},
		{"forwarded without for", "10.0.0.1:1", fwd("for=6.6.6.6, proto=https"), proxies, "10.0.0.1"},
		{"forwarded two for", "10.0.0.1:1", fwd("for=6.6.6.6;for=192.0.2.60"), proxies, "10.0.0.1"},
		{"forwarded unterminated quote", "10.0.0.1:1", fwd(`for="192.0.2.60`), proxies, "10.0.0.1"},
		{"forwarded stray quote", "10.0.0.1:1", fwd(`for=192.0.2"60`), proxies, "10.0.0.1"},
		{"forwarded garbage", "10.0.0.1:1", fwd(";;,=,"), proxies, "10.0.0.1"},
		{"forwarded garbage left of the client", "10.0.0.1:1", fwd(`for=";, for=192.0.2.60`), proxies, "10.0.0.1"},
		{"forwarded all trusted: left-most", "10.0.0.1:1", fwd("for=10.0.0.9, for=10.0.0.8"), proxies, "10.0.0.9"},

		// Both headers: believed when they agree, else neither.
		{"both agree", "10.0.0.1:1", append(xff("1.2.3.4"), fwd("for=1.2.3.4")...), proxies, "1.2.3.4"},
		{"both agree after skipping", "10.0.0.1:1", append(xff("6.6.6.6, 1.2.3.4"), fwd("for=1.2.3.4;proto=https")...), proxies, "1.2.3.4"},
		{"both disagree: the client forged one", "10.0.0.1:1", append(xff("1.2.3.4"), fwd("for=6.6.6.6")...), proxies, "10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.RemoteAddr = tt.remote
			for _, h := range tt.headers {
				r.Header.Add(h.name, h.value)
			}
			if got := tt.proxies.ClientIP(r); got != tt.want {
				t.Errorf("ClientIP = %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzClientIP: whatever the headers say, the answer is the peer unless
// the peer is trusted, and it is always an address (never header text).
func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:1", "1.2.3.4", `for="[2001:db8::1]:80"`)
	f.Add("198.51.100.1:1", "1.2.3.4", "for=1.2.3.4")
	f.Add("10.0.0.1:1", ",,,", `for="\`)
	proxies := TrustedProxies{netip.MustParsePrefix("10.0.0.0/8")}
	f.Fuzz(func(t *testing.T, remote, xffv, fwdv string) {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xffv)
		r.Header.Set("Forwarded", fwdv)
		got := proxies.ClientIP(r)
		peer, ok := parseNode(remote)
		if !ok {
			if got != hostOnly(remote) {
				t.Fatalf("unparsable peer %q: %q", remote, got)
			}
			return
		}
		if !proxies.Trusts(peer) && got != peer.String() {
			t.Fatalf("untrusted peer %q moved to %q", remote, got)
		}
		if _, err := netip.ParseAddr(got); err != nil {
			t.Fatalf("ClientIP = %q, not an address", got)
		}
	})
}

func TestIPKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"203.0.113.9", "203.0.113.9"},
		{"::ffff:203.0.113.9", "203.0.113.9"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2::ffff", "2001:db8:1:2::/64"},
		{"@", "@"},
	}
	for _, tt := range tests {
		if got := IPKey(tt.in); got != tt.want {
			t.Errorf("IPKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
