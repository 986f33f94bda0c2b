package tasks

import "sync"

// Broker fans task changes out to listen subscriptions. A subscription
// learns which of its tasks changed and re-reads them, so coalesced or
// late wake-ups never show stale state.
type Broker struct {
	mu   sync.Mutex
	subs map[string]map[*subscription]struct{}
}

type subscription struct {
	mu      sync.Mutex
	pending map[string]struct{}
	wake    chan struct{}
}

func newBroker() *Broker { return &Broker{subs: map[string]map[*subscription]struct{}{}} }

func (b *Broker) subscribe(ids []string) *subscription {
	s := &subscription{pending: map[string]struct{}{}, wake: make(chan struct{}, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		m := b.subs[id]
		if m == nil {
			m = map[*subscription]struct{}{}
			b.subs[id] = m
		}
		m[s] = struct{}{}
	}
	return s
}

func (b *Broker) unsubscribe(s *subscription, ids []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		delete(b.subs[id], s)
		if len(b.subs[id]) == 0 {
			delete(b.subs, id)
		}
	}
}

func (b *Broker) publish(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs[id] {
		s.mark(id)
	}
}

// publishAll marks every subscribed id changed (a resync).
func (b *Broker) publishAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, subs := range b.subs {
		for s := range subs {
			s.mark(id)
		}
	}
}

func (s *subscription) mark(id string) {
	s.mu.Lock()
	s.pending[id] = struct{}{}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns and clears the ids changed since the last take.
func (s *subscription) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.pending))
	for id := range s.pending {
		ids = append(ids, id)
	}
	clear(s.pending)
	return ids
}
