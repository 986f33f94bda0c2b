package replicate_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/replicate"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// fuzzNow is the fuzz targets' clock (the emulator's start).
var fuzzNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// FuzzParseWebhook feeds ParseWebhook arbitrary deliveries (seeded with
// genuine ones, testdata/fuzz/FuzzParseWebhook): it must not panic, and
// a delivery verifies only if its webhook-signature holds a correct v1
// signature of (webhook-id, webhook-timestamp, body) under our secret
// within the tolerance; nothing from the query ever reaches the event.
func FuzzParseWebhook(f *testing.F) {
	body := string(emulator.Fixture("replicate", "prediction_succeeded.json"))
	ts := "1767268800" // fuzzNow
	sig, _ := replicate.Sign(emulator.DefaultWebhookSecret, "msg_1", ts, []byte(body))
	f.Add("msg_1", ts, sig, body, "gen-1")
	f.Add("msg_1", ts, "v1,"+strings.Repeat("A", 44)+" "+sig, body, "")
	f.Add("msg_2", ts, sig, body, "")
	f.Add("msg_1", "1767268000", sig, body, "")
	f.Add("", "", "", "{}", "")
	p, err := replicate.New(replicate.Config{Token: "r8", WebhookSecret: emulator.DefaultWebhookSecret, Now: func() time.Time { return fuzzNow }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, ts, sigs, body, key string) {
		h := http.Header{}
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", ts)
		h.Set("Webhook-Signature", sigs)
		ev, err := p.ParseWebhook(context.Background(), h, url.Values{provider.WebhookKeyParam: {key}}, []byte(body))
		if err != nil {
			if ev.Trusted || ev.Duplicate || ev.Status != nil {
				t.Fatalf("refused delivery yields %+v", ev)
			}
			return
		}
		if !ev.Trusted || ev.Key != "" || ev.JobID == "" {
			t.Fatalf("accepted event %+v", ev)
		}
		want, _ := replicate.Sign(emulator.DefaultWebhookSecret, id, ts, []byte(body))
		if !strings.Contains(" "+sigs+" ", " "+want+" ") {
			t.Fatalf("verified without a correct signature: id %q ts %q sigs %q", id, ts, sigs)
		}
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || sec < fuzzNow.Add(-5*time.Minute).Unix() || sec > fuzzNow.Add(5*time.Minute).Unix() {
			t.Fatalf("verified outside the window: ts %q", ts)
		}
	})
}
