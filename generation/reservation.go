package generation

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/words"
)

// DefaultReservationTTL is how long a reserved generation waits for its
// uploads or its approval (Config.ReservationTTL's default).
const DefaultReservationTTL = 30 * time.Minute

// ExpireReservations fails, refunded, every generation still reserved
// ReservationTTL after it was created: nobody uploaded what it waits for
// (or approved its spend), and a client waiting on it, its task too,
// would otherwise wait for ever. The decision is the store's
// compare-and-set on reserved (EventExpire): an upload that queued it
// first wins, and one that comes later finds it failed.
func (s *Service) ExpireReservations(ctx context.Context) (int, error) {
	ttl := s.cfg.ReservationTTL
	before := s.cfg.Now().Add(-ttl)
	total := 0
	for {
		ids, err := s.store.ReservationsToExpire(ctx, before, purgeBatch)
		if err != nil || len(ids) == 0 {
			return total, err
		}
		ended := 0
		for _, id := range ids {
			g, err := s.change(ctx, id, func(ctx context.Context, tx Tx, at time.Time) (bool, error) {
				cur, err := readIn(ctx, tx, id)
				if err != nil {
					return false, err
				}
				why := expiredWhy(cur.Params, ttl)
				c := change(id, EventExpire, "")
				c.At, c.ErrorKind, c.ErrorMessage = at, ErrorExpired, why
				c.Message = fmt.Sprintf("failed: %s; %s refunded", why, credits(cur.Credits))
				return tx.Apply(ctx, c)
			})
			if err != nil {
				return total, err
			}
			if g.Status == StatusFailed {
				ended++
			}
		}
		total += ended
		if len(ids) < purgeBatch || ended == 0 {
			return total, nil
		}
	}
}

// expiredWhy says what a reservation that expired waited for.
func expiredWhy(p Params, ttl time.Duration) string {
	var what []string
	if p.AwaitsImage {
		what = append(what, "its input image")
	}
	for _, r := range p.Awaits {
		what = append(what, "its "+strings.ReplaceAll(r, "_", " "))
	}
	if len(what) > 0 {
		return fmt.Sprintf("%s never came: nobody called upload_input within %s (DARKROOM_RESERVATION_TTL); call generate again with the files", words.And(what), short(ttl))
	}
	return fmt.Sprintf("its spend was not approved within %s (DARKROOM_RESERVATION_TTL); call generate again", short(ttl))
}

// short writes d without trailing zero units: 30m, 1h, 1m30s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
