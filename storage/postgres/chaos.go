package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Chaos is a test hook on the listener: it drops, delays and reorders the
// notifications it receives, as a network and a busy replica would, but
// only in the ways PostgreSQL can: a notification is lost only with its
// connection (a drop ends the connection, and the listener reconnects);
// a delay holds the whole stream (the listener handles one at a time);
// two change notifications may swap, but never across a fence (whose
// order against commits is what the fence rests on).
type Chaos struct {
	Drop, Delay, Reorder float64 // probability per change notification
	MaxDelay             time.Duration

	mu   sync.Mutex
	rnd  *rand.Rand
	held *notice // a change waiting for the next one, to swap with it
}

// ErrChaosDrop ends a listener connection on which Chaos dropped a
// notification.
var ErrChaosDrop = errors.New("chaos: notification dropped with its connection")

// ParseChaos reads "drop=0.02,delay=0.1,reorder=0.3,maxdelay=200ms,seed=1".
func ParseChaos(s string) (*Chaos, error) {
	c := &Chaos{MaxDelay: 200 * time.Millisecond}
	seed := uint64(time.Now().UnixNano())
	for kv := range strings.SplitSeq(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		var err error
		switch k {
		case "drop":
			c.Drop, err = strconv.ParseFloat(v, 64)
		case "delay":
			c.Delay, err = strconv.ParseFloat(v, 64)
		case "reorder":
			c.Reorder, err = strconv.ParseFloat(v, 64)
		case "maxdelay":
			c.MaxDelay, err = time.ParseDuration(v)
		case "seed":
			seed, err = strconv.ParseUint(v, 10, 64)
		case "":
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			return nil, fmt.Errorf("listen chaos %q: %w", kv, err)
		}
	}
	c.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return c, nil
}

func (c *Chaos) roll(p float64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rnd == nil {
		c.rnd = rand.New(rand.NewPCG(1, 2))
	}
	return p > 0 && c.rnd.Float64() < p
}

func (c *Chaos) delay() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.rnd.Int64N(int64(c.MaxDelay) + 1))
}

// pass hands n (and what it held) to deliver, or ends the connection.
func (c *Chaos) pass(ctx context.Context, n notice, fenceChannel string, deliver func(notice)) error {
	if n.channel == fenceChannel {
		c.release(deliver)
		deliver(n)
		return nil
	}
	if c.roll(c.Drop) {
		c.mu.Lock()
		c.held = nil // lost with the connection too
		c.mu.Unlock()
		return ErrChaosDrop
	}
	if c.roll(c.Delay) && c.MaxDelay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.delay()):
		}
	}
	c.mu.Lock()
	held := c.held
	if held == nil && c.rnd.Float64() < c.Reorder {
		c.held = &n
		c.mu.Unlock()
		return nil
	}
	c.held = nil
	c.mu.Unlock()
	deliver(n)
	if held != nil {
		deliver(*held) // after the one that followed it
	}
	return nil
}

func (c *Chaos) release(deliver func(notice)) {
	c.mu.Lock()
	held := c.held
	c.held = nil
	c.mu.Unlock()
	if held != nil {
		deliver(*held)
	}
}
