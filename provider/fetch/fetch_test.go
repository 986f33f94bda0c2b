package fetch_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/fetch"
)

func server(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/file":
			w.Write([]byte(strings.Repeat("x", 100)))
		case "/stream": // no Content-Length
			w.Header().Set("Content-Type", "application/octet-stream")
			for range 10 {
				w.Write([]byte(strings.Repeat("y", 10)))
				w.(http.Flusher).Flush()
			}
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/gone":
			http.Error(w, "gone", http.StatusNotFound)
		case "/oops":
			http.Error(w, "oops", http.StatusBadGateway)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOpen(t *testing.T) {
	srv := server(t)
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	ctx := context.Background()
	loose := fetch.Options{Hosts: []string{"127.0.0.1"}, AllowHTTP: true, AllowPrivate: true}
	tests := []struct {
		name string
		opts fetch.Options
		url  string
		err  error // nil: reads 100 bytes
	}{
		{"allowed", loose, srv.URL + "/file", nil},
		{"http refused", fetch.Options{Hosts: []string{"127.0.0.1"}, AllowPrivate: true}, srv.URL + "/file", fetch.ErrScheme},
		{"ftp refused", loose, "ftp://127.0.0.1/file", fetch.ErrScheme},
		{"host not listed", fetch.Options{Hosts: []string{"replicate.delivery"}, AllowHTTP: true, AllowPrivate: true}, srv.URL + "/file", fetch.ErrHostNotAllowed},
		{"credentials in URL", loose, "http://user:pw@127.0.0.1:" + port + "/file", fetch.ErrHostNotAllowed},
		{"loopback literal", fetch.Options{Hosts: []string{"127.0.0.1"}, AllowHTTP: true}, srv.URL + "/file", fetch.ErrPrivateAddress},
		// localhost is allowlisted but resolves to loopback: refused when dialling.
		{"loopback by name (dial-time check)", fetch.Options{Hosts: []string{"localhost"}, AllowHTTP: true}, "http://localhost:" + port + "/file", fetch.ErrPrivateAddress},
		{"redirect off the allowlist", fetch.Options{Hosts: []string{"127.0.0.1"}, AllowHTTP: true, AllowPrivate: true}, srv.URL + "/redirect?to=" + url.QueryEscape("http://localhost:"+port+"/file"), fetch.ErrHostNotAllowed},
		{"redirect to metadata", loose, srv.URL + "/redirect?to=" + url.QueryEscape("http://169.254.169.254/latest"), fetch.ErrHostNotAllowed},
		{"redirect loop", loose, srv.URL + "/loop", fetch.ErrTooManyHops},
		{"size cap announced", fetch.Options{Hosts: []string{"127.0.0.1"}, AllowHTTP: true, AllowPrivate: true, MaxBytes: 50}, srv.URL + "/file", fetch.ErrTooLarge},
		{"size cap streamed", fetch.Options{Hosts: []string{"127.0.0.1"}, AllowHTTP: true, AllowPrivate: true, MaxBytes: 50}, srv.URL + "/stream", fetch.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := fetch.New(tc.opts).Open(ctx, tc.url)
			if err == nil {
				var b []byte
				b, err = io.ReadAll(rc)
				rc.Close()
				if err == nil && len(b) != 100 {
					t.Fatalf("read %d bytes", len(b))
				}
			}
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if tc.err != nil {
				var pe *provider.PermanentError
				if !errors.As(fetch.ProviderError("x", err), &pe) {
					t.Fatalf("policy error not permanent: %v", err)
				}
			}
		})
	}
	// Status mapping: gone is permanent, 5xx retryable.
	f := fetch.New(loose)
	_, err := f.Open(ctx, srv.URL+"/gone")
	var pe *provider.PermanentError
	if !errors.As(fetch.ProviderError("x", err), &pe) {
		t.Fatalf("404: %v", err)
	}
	_, err = f.Open(ctx, srv.URL+"/oops")
	var re *provider.RetryableError
	if !errors.As(fetch.ProviderError("x", err), &re) {
		t.Fatalf("502: %v", err)
	}
}

func TestPublic(t *testing.T) {
	for s, want := range map[string]bool{
		"8.8.8.8": true, "151.101.1.1": true, "2606:4700::1111": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "224.0.0.1": false,
		"255.255.255.255": false, "::1": false, "::": false, "fe80::1": false, "fd00::1": false,
		"::ffff:127.0.0.1": false, "::ffff:10.0.0.1": false, "64:ff9b::a00:1": false, "198.18.0.1": false,
	} {
		if got := fetch.Public(netip.MustParseAddr(s)); got != want {
			t.Errorf("Public(%s) = %v", s, got)
		}
	}
}

func TestHostAllowed(t *testing.T) {
	pats := []string{"replicate.delivery", "*.replicate.delivery", "*.fal.media"}
	for h, want := range map[string]bool{
		"replicate.delivery": true, "pbxt.replicate.delivery": true, "a.b.replicate.delivery": true,
		"REPLICATE.DELIVERY.": true, "v3.fal.media": true, "fal.media": false,
		"evilreplicate.delivery": false, "replicate.delivery.evil.com": false, "": false,
	} {
		if got := fetch.HostAllowed(pats, h); got != want {
			t.Errorf("HostAllowed(%q) = %v", h, got)
		}
	}
}

// TestOpenWithDropsCredentialsAcrossHosts: a key header reaches the
// URL's own host and never the host a redirect points at.
func TestOpenWithDropsCredentialsAcrossHosts(t *testing.T) {
	seen := make(chan string, 2)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- "other:" + r.Header.Get("X-Goog-Api-Key")
		w.Write([]byte("file"))
	}))
	t.Cleanup(other.Close)
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- "first:" + r.Header.Get("X-Goog-Api-Key")
		// 127.0.0.1 and localhost are different hosts to the client.
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/f", http.StatusFound)
	}))
	t.Cleanup(first.Close)
	f := fetch.New(fetch.Options{Hosts: []string{"127.0.0.1", "localhost"}, AllowHTTP: true, AllowPrivate: true})
	rc, err := f.OpenWith(context.Background(), first.URL+"/file", http.Header{"X-Goog-Api-Key": {"secret"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if got := []string{<-seen, <-seen}; got[0] != "first:secret" || got[1] != "other:" || string(b) != "file" {
		t.Fatalf("headers seen %v, body %q", got, b)
	}
}
