package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/darkroom-mcp/darkroom/provider"
)

// maxWebhookBody caps a provider delivery; real ones are a few KiB.
const maxWebhookBody = 1 << 20

// WebhookHandler receives deliveries for provider name at
// /webhooks/{name}: a bad signature is 401 and changes nothing; a replay
// is acknowledged and ignored; anything else is acknowledged at once and
// handed to sink, which looks at the named generation.
func WebhookHandler(name string, parser provider.WebhookParser, sink func(ctx context.Context, name string, ev provider.WebhookEvent) error, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		ev, err := parser.ParseWebhook(r.Header, r.URL.Query(), body)
		switch {
		case errors.Is(err, provider.ErrWebhookUnauthenticated):
			log.Warn("webhook refused: signature does not verify", "provider", name)
			http.Error(w, "signature does not verify", http.StatusUnauthorized)
			return
		case err != nil:
			http.Error(w, "malformed delivery", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
		if ev.Duplicate {
			return
		}
		// The runner only records the hint and wakes the generation: quick
		// enough to do before returning, so nothing is lost if we crash.
		if err := sink(context.WithoutCancel(r.Context()), name, ev); err != nil {
			log.Error("webhook: wake generation", "provider", name, "err", err)
		}
	})
}
