package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// waitLimit bounds every blocking wait in these tests (a hang is a bug,
// not a slow machine).
const waitLimit = 30 * time.Second

var discard = slog.New(slog.DiscardHandler)

// TestWebhookHandlerStatus: what intake answers decides the status; a
// delivery that is refused before intake never reaches it.
func TestWebhookHandlerStatus(t *testing.T) {
	cases := []struct {
		name       string
		method     string
		body       []byte
		intakeErr  error
		wantStatus int
		wantIntake bool
	}{
		{name: "stored", method: http.MethodPost, body: []byte(`{"id":"job-1"}`), wantStatus: http.StatusOK, wantIntake: true},
		{name: "empty body stored", method: http.MethodPost, body: nil, wantStatus: http.StatusOK, wantIntake: true},
		{name: "body of exactly 1 MiB", method: http.MethodPost, body: bytes.Repeat([]byte("a"), maxWebhookBody), wantStatus: http.StatusOK, wantIntake: true},
		{name: "unverified", method: http.MethodPost, body: []byte(`{}`), intakeErr: ErrUnverified, wantStatus: http.StatusUnauthorized, wantIntake: true},
		{name: "unverified wrapped", method: http.MethodPost, body: []byte(`{}`), intakeErr: fmt.Errorf("%w: bad hmac", ErrUnverified), wantStatus: http.StatusUnauthorized, wantIntake: true},
		{name: "malformed", method: http.MethodPost, body: []byte(`{`), intakeErr: ErrMalformed, wantStatus: http.StatusBadRequest, wantIntake: true},
		{name: "malformed wrapped", method: http.MethodPost, body: []byte(`{`), intakeErr: fmt.Errorf("parse: %w", ErrMalformed), wantStatus: http.StatusBadRequest, wantIntake: true},
		{name: "storage failure", method: http.MethodPost, body: []byte(`{}`), intakeErr: errors.New("database is locked"), wantStatus: http.StatusServiceUnavailable, wantIntake: true},
		{name: "cancelled context from intake", method: http.MethodPost, body: []byte(`{}`), intakeErr: context.Canceled, wantStatus: http.StatusServiceUnavailable, wantIntake: true},
		{name: "GET", method: http.MethodGet, wantStatus: http.StatusMethodNotAllowed},
		{name: "PUT", method: http.MethodPut, body: []byte(`{}`), wantStatus: http.StatusMethodNotAllowed},
		{name: "body over 1 MiB", method: http.MethodPost, body: bytes.Repeat([]byte("a"), maxWebhookBody+1), wantStatus: http.StatusRequestEntityTooLarge},
		{name: "body far over 1 MiB", method: http.MethodPost, body: bytes.Repeat([]byte("a"), 4*maxWebhookBody), wantStatus: http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			var gotHeader http.Header
			var gotQuery url.Values
			var gotBody []byte
			var ctxErr error
			intake := func(ctx context.Context, h http.Header, q url.Values, body []byte) error {
				calls.Add(1)
				gotHeader, gotQuery, gotBody, ctxErr = h, q, body, ctx.Err()
				return c.intakeErr
			}
			srv := httptest.NewServer(WebhookHandler("replicate", intake, discard))
			defer srv.Close()
			req, err := http.NewRequest(c.method, srv.URL+"/webhooks/replicate?gen=g-1&token=t", bytes.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Webhook-Id", "msg-1")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != c.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, c.wantStatus)
			}
			if c.wantStatus == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("405 with Allow %q, want POST", resp.Header.Get("Allow"))
			}
			if n := calls.Load(); (n == 1) != c.wantIntake || n > 1 {
				t.Fatalf("intake called %d times, want called=%v", n, c.wantIntake)
			}
			if !c.wantIntake {
				return
			}
			if !bytes.Equal(gotBody, c.body) {
				t.Errorf("intake got a %d-byte body, want the %d bytes sent", len(gotBody), len(c.body))
			}
			if gotHeader.Get("Webhook-Id") != "msg-1" {
				t.Errorf("intake got header Webhook-Id %q, want msg-1", gotHeader.Get("Webhook-Id"))
			}
			if gotQuery.Get("gen") != "g-1" || gotQuery.Get("token") != "t" {
				t.Errorf("intake got query %v, want gen=g-1 token=t", gotQuery)
			}
			if ctxErr != nil {
				t.Errorf("intake's context was already done: %v", ctxErr)
			}
		})
	}
}

// writeEvents reports every status or body write of the response.
type writeEvents struct {
	http.ResponseWriter
	events chan<- string
}

func (w *writeEvents) WriteHeader(code int) {
	w.events <- fmt.Sprintf("header %d", code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *writeEvents) Write(b []byte) (int, error) {
	w.events <- "write"
	return w.ResponseWriter.Write(b)
}

// TestWebhookAckAfterIntake: the acknowledgement is written only once
// intake has returned; a delivery still being stored is not answered,
// so a crash in the meantime makes the provider retry rather than lose it.
func TestWebhookAckAfterIntake(t *testing.T) {
	cases := []struct {
		name       string
		intakeErr  error
		wantStatus int
	}{
		{name: "stored", wantStatus: http.StatusOK},
		{name: "store failed", intakeErr: errors.New("disk full"), wantStatus: http.StatusServiceUnavailable},
		{name: "unverified", intakeErr: ErrUnverified, wantStatus: http.StatusUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			intake := func(ctx context.Context, h http.Header, q url.Values, body []byte) error {
				close(entered)
				<-release
				return c.intakeErr
			}
			events := make(chan string, 16)
			h := WebhookHandler("fal", intake, discard)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(&writeEvents{ResponseWriter: w, events: events}, r)
			}))
			defer srv.Close()
			defer func() {
				select {
				case <-release:
				default:
					close(release) // a failed test must not hang the server's Close
				}
			}()

			type answer struct {
				status int
				err    error
			}
			answered := make(chan answer, 1)
			go func() {
				resp, err := srv.Client().Post(srv.URL+"/webhooks/fal", "application/json", strings.NewReader(`{"request_id":"r-1"}`))
				if err != nil {
					answered <- answer{err: err}
					return
				}
				_ = resp.Body.Close()
				answered <- answer{status: resp.StatusCode}
			}()

			select {
			case <-entered:
			case a := <-answered:
				t.Fatalf("answered %d (%v) without calling intake", a.status, a.err)
			case <-time.After(waitLimit):
				t.Fatal("intake was never called")
			}
			// intake is blocked: nothing may have been written, nor received.
			select {
			case e := <-events:
				t.Fatalf("response %s written while intake was still storing the delivery", e)
			case a := <-answered:
				t.Fatalf("client got %d (%v) while intake was still storing the delivery", a.status, a.err)
			default:
			}
			close(release)
			select {
			case a := <-answered:
				if a.err != nil {
					t.Fatal(a.err)
				}
				if a.status != c.wantStatus {
					t.Errorf("status %d, want %d", a.status, c.wantStatus)
				}
			case <-time.After(waitLimit):
				t.Fatal("no response after intake returned")
			}
			if e := <-events; e != fmt.Sprintf("header %d", c.wantStatus) {
				t.Errorf("first write after intake was %q, want the %d header", e, c.wantStatus)
			}
		})
	}
}
