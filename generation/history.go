package generation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// purgeBatch bounds one purge transaction: a round deletes in batches,
// never holding the writer long.
const purgeBatch = 200

// DeliveryWindow is how long a webhook delivery of an ended generation
// is kept: a provider's retries of it arrive within minutes, and one
// that comes later still changes nothing (the generation has ended).
const DeliveryWindow = time.Hour

// PurgeHistory deletes the records of generations that ended more than
// Config.History ago (their input images first), and the webhook
// deliveries that can dedupe nothing any more, so that the store grows
// only with retention. Each batch is its own transaction.
func (s *Service) PurgeHistory(ctx context.Context) (gens, deliveries int64, err error) {
	now := s.cfg.Now()
	for s.cfg.History > 0 {
		rows, err := s.store.GenerationsToPurge(ctx, now.Add(-s.cfg.History), purgeBatch)
		if err != nil || len(rows) == 0 {
			if err != nil {
				return gens, deliveries, err
			}
			break
		}
		for _, r := range rows {
			var p Params
			if err := json.Unmarshal([]byte(r.Params), &p); err != nil {
				return gens, deliveries, fmt.Errorf("generation %s params: %w", r.ID, err)
			}
			for _, in := range p.files() {
				if !in.owned() {
					continue // an output of another generation, deleted with it
				}
				if err := s.cfg.Blobs.Delete(ctx, in.Key); err != nil {
					return gens, deliveries, fmt.Errorf("delete input %s: %w", in.Key, err)
				}
			}
		}
		var n int64
		err = s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
			n = 0
			for _, r := range rows {
				ok, err := tx.DeleteGeneration(ctx, r.ID)
				if err != nil {
					return err
				}
				if ok {
					n++
				}
			}
			return nil
		})
		if err != nil {
			return gens, deliveries, err
		}
		gens += n
		if len(rows) < purgeBatch {
			break
		}
	}
	for {
		var n int64
		err := s.store.Update(ctx, func(ctx context.Context, tx Tx) (err error) {
			n, err = tx.PurgeDeliveries(ctx, now.Add(-DeliveryWindow), purgeBatch)
			return err
		})
		deliveries += n
		if err != nil || n < purgeBatch {
			return gens, deliveries, err
		}
	}
}
