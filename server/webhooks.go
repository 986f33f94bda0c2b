package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
)

// maxWebhookBody caps a provider delivery; real ones are a few KiB.
const maxWebhookBody = 1 << 20

// Intake verifies one delivery and stores it durably; it returns nil once
// stored (or known already), ErrUnverified when its signature does not
// verify and ErrMalformed when it cannot be read. server only moves the
// bytes: what a delivery means is the provider's and the runner's.
type Intake func(ctx context.Context, h http.Header, q url.Values, body []byte) error

// Errors an Intake returns for a delivery that is refused.
var (
	ErrUnverified = errors.New("webhook signature does not verify")
	ErrMalformed  = errors.New("malformed webhook delivery")
)

// WebhookHandler receives deliveries for provider name at
// /webhooks/{name}: a bad signature is 401 and changes nothing; a
// delivery is acknowledged (2xx) only after intake stored it, so none is
// lost to a crash; a failure to store it is 503, which providers retry.
func WebhookHandler(name string, intake Intake, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err != nil {
			http.Error(w, "body not read", http.StatusBadRequest)
			return
		}
		err = intake(context.WithoutCancel(r.Context()), r.Header, r.URL.Query(), body)
		switch {
		case err == nil:
			w.WriteHeader(http.StatusOK)
		case errors.Is(err, ErrUnverified):
			log.Warn("webhook refused: signature does not verify", "provider", name)
			http.Error(w, "signature does not verify", http.StatusUnauthorized)
		case errors.Is(err, ErrMalformed):
			http.Error(w, "malformed delivery", http.StatusBadRequest)
		default:
			log.Error("webhook: store delivery", "provider", name, "err", err)
			http.Error(w, "delivery not stored; retry", http.StatusServiceUnavailable)
		}
	})
}
