package generation

import (
	"slices"
	"sync"
	"testing"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (h *Hub) size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiters)
}

func TestHubWakeAndRelease(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *Hub)
	}{
		{"publish wakes every watcher of the id, only that id", func(t *testing.T, h *Hub) {
			a1, ra1 := h.Watch("a")
			a2, ra2 := h.Watch("a")
			b, rb := h.Watch("b")
			defer ra1()
			defer ra2()
			defer rb()
			if closed(a1) || closed(a2) || closed(b) {
				t.Fatal("woken before any publish")
			}
			h.Publish("a")
			if !closed(a1) || !closed(a2) {
				t.Fatal("a watcher of a was not woken")
			}
			if closed(b) {
				t.Fatal("publishing a woke b")
			}
		}},
		{"wake all wakes every watcher, tells no subscriber, and watching goes on", func(t *testing.T, h *Hub) {
			told := 0
			h.Subscribe(func(string) { told++ })
			a, ra := h.Watch("a")
			b, rb := h.Watch("b")
			h.WakeAll()
			if !closed(a) || !closed(b) || told != 0 {
				t.Fatalf("woken a=%v b=%v, subscribers told %d times", closed(a), closed(b), told)
			}
			ra()
			rb()
			a2, ra2 := h.Watch("a")
			defer ra2()
			if closed(a2) || h.size() != 1 {
				t.Fatal("a watch taken after the resync is not live")
			}
		}},
		{"release frees the entry", func(t *testing.T, h *Hub) {
			_, r1 := h.Watch("a")
			_, r2 := h.Watch("a")
			r1()
			if h.size() != 1 {
				t.Fatal("entry dropped while a watcher remains")
			}
			r1() // idempotent: must not drop the other watcher's count
			if h.size() != 1 {
				t.Fatal("a second release of the same watch dropped the entry")
			}
			r2()
			if h.size() != 0 {
				t.Fatalf("%d entries left after every release", h.size())
			}
		}},
		{"publish then release leaves nothing", func(t *testing.T, h *Hub) {
			_, r := h.Watch("a")
			h.Publish("a")
			r()
			if h.size() != 0 {
				t.Fatalf("%d entries left", h.size())
			}
		}},
		{"a stale release spares the next watch", func(t *testing.T, h *Hub) {
			_, old := h.Watch("a")
			h.Publish("a")
			c, cur := h.Watch("a") // a new entry for the next change
			old()                  // the woken waiter releases late
			if h.size() != 1 {
				t.Fatal("a stale release removed the new watch")
			}
			h.Publish("a")
			if !closed(c) {
				t.Fatal("the new watch missed the second change")
			}
			cur()
			if h.size() != 0 {
				t.Fatal("entry left behind")
			}
		}},
		{"publish without watchers is harmless", func(t *testing.T, h *Hub) {
			h.Publish("nobody")
			if h.size() != 0 {
				t.Fatal("publish created an entry")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, NewHub()) })
	}
}

func TestHubSubscribers(t *testing.T) {
	h := NewHub()
	var mu sync.Mutex
	var got []string
	h.Subscribe(func(id string) { mu.Lock(); got = append(got, "1:"+id); mu.Unlock() })
	h.Subscribe(func(id string) { mu.Lock(); got = append(got, "2:"+id); mu.Unlock() })
	h.Publish("x")
	h.Publish("y")
	if !slices.Equal(got, []string{"1:x", "2:x", "1:y", "2:y"}) {
		t.Fatalf("subscribers saw %v", got)
	}
}

// TestHubNoLeakUnderChurn: many waiters coming and going with publishes in
// between leave the map empty.
func TestHubNoLeakUnderChurn(t *testing.T) {
	h := NewHub()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			id := []string{"a", "b", "c"}[i%3]
			for range 200 {
				c, release := h.Watch(id)
				if i%2 == 0 {
					h.Publish(id)
					<-c
				}
				release()
			}
		})
	}
	wg.Wait()
	if h.size() != 0 {
		t.Fatalf("%d entries leaked", h.size())
	}
}
