package aeprelaytest

import "sync"

// outbox is the queue between the relay, which must never block on a
// consumer, and the one goroutine that writes to it. Order is kept.
type outbox[T any] struct {
	mu     sync.Mutex
	items  []T
	live   int // live items queued
	limit  int
	closed bool
	// ready holds a token while items wait.
	ready chan struct{}
}

func newOutbox[T any](limit int) *outbox[T] {
	return &outbox[T]{limit: limit, ready: make(chan struct{}, 1)}
}

// push queues an item. A live item (fan-out) fails when limit live items
// already wait, which makes the caller drop the slow consumer (AEP-0003
// §8.4: deliver or disconnect); replay and control items always fit, as
// they are bounded by the buffers. push fails once the outbox is closed.
func (o *outbox[T]) push(item T, live bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || (live && o.live >= o.limit) {
		return false
	}
	o.items = append(o.items, item)
	if live {
		o.live++
	}
	select {
	case o.ready <- struct{}{}:
	default:
	}
	return true
}

// take removes and returns everything queued.
func (o *outbox[T]) take() []T {
	o.mu.Lock()
	defer o.mu.Unlock()
	items := o.items
	o.items, o.live = nil, 0
	return items
}

// close makes every later push fail.
func (o *outbox[T]) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}
