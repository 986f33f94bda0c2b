package netx

import "testing"

func TestLoopback(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"localhost", true},
		{"localhost:8080", true},
		{"127.0.0.1", true},
		{"127.9.9.9:1", true},
		{"[::1]:443", true},
		{"::1", true},
		{"[::1]", true},
		{"LOCALHOST", false}, // go-sdk compares exactly
		{"[::ffff:127.0.0.1]:80", true},
		{"10.0.0.1", false},
		{"example.com:80", false},
		{"localhost.example.com", false},
		{"", false},
	} {
		if got := Loopback(c.addr); got != c.want {
			t.Errorf("Loopback(%q) = %v, want %v", c.addr, got, c.want)
		}
	}
}
