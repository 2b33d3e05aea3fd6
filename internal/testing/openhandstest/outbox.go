package openhandstest

import (
	"errors"
	"sync"
	"time"
)

var (
	errOutboxClosed   = errors.New("connection is closing")
	errOutboxOverflow = errors.New("outbound queue is full")
)

// outFrame is one queued write: a text frame, or the close frame that ends
// the connection.
type outFrame struct {
	data        []byte
	trickle     time.Duration // > 0: the payload goes out a byte at a time (faultConn.trickle)
	isClose     bool
	closeCode   int
	closeReason string
}

// outbox is a connection's bounded outbound queue in front of its single
// writer goroutine. Publishers never block on it: when it is full the
// connection is failed (closed with 1013 "slow_consumer"), never a frame
// silently dropped, so a slow client cannot stall the scripting API.
type outbox struct {
	maxFrames int
	maxBytes  int

	mu      sync.Mutex
	frames  []outFrame
	bytes   int
	closing bool // no more frames admitted; a close frame may still be queued
	done    bool // writer must stop
	wake    chan struct{}
	space   chan struct{}
	stopped chan struct{} // closed once done
}

func newOutbox(maxFrames, maxBytes int) *outbox {
	return &outbox{
		maxFrames: maxFrames,
		maxBytes:  maxBytes,
		wake:      make(chan struct{}, 1),
		space:     make(chan struct{}, 1),
		stopped:   make(chan struct{}),
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// offer queues data without blocking. On overflow the connection is failed
// with 1013 "slow_consumer" and errOutboxOverflow is returned.
func (o *outbox) offer(data []byte) error {
	return o.offerFrame(outFrame{data: data})
}

func (o *outbox) offerFrame(f outFrame) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return errOutboxClosed
	}
	if len(o.frames) >= o.maxFrames || o.bytes+len(f.data) > o.maxBytes {
		o.failLocked(1013, "slow_consumer")
		return errOutboxOverflow
	}
	o.pushLocked(f)
	return nil
}

// put queues data for history replay, waiting while the queue is more than
// half full so that live traffic keeps headroom; the wait ends when the
// connection closes.
func (o *outbox) put(data []byte) error {
	for {
		o.mu.Lock()
		if o.closing {
			o.mu.Unlock()
			return errOutboxClosed
		}
		if len(o.frames) < o.maxFrames/2 && o.bytes+len(data) <= o.maxBytes/2 || len(o.frames) == 0 {
			o.pushLocked(outFrame{data: data})
			o.mu.Unlock()
			return nil
		}
		o.mu.Unlock()
		select {
		case <-o.space:
		case <-o.stopped:
		}
	}
}

func (o *outbox) pushLocked(f outFrame) {
	o.frames = append(o.frames, f)
	o.bytes += len(f.data)
	signal(o.wake)
}

// closeAfterPending queues a close frame behind what is already queued.
func (o *outbox) closeAfterPending(code int, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return
	}
	o.closing = true
	o.pushLocked(outFrame{isClose: true, closeCode: code, closeReason: reason})
	signal(o.space)
}

// fail discards what is queued and sends only the close frame.
func (o *outbox) fail(code int, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failLocked(code, reason)
}

func (o *outbox) failLocked(code int, reason string) {
	if o.closing {
		return
	}
	o.closing = true
	o.frames = []outFrame{{isClose: true, closeCode: code, closeReason: reason}}
	o.bytes = 0
	signal(o.wake)
	signal(o.space)
}

// isClosing reports whether the connection admits no more frames.
func (o *outbox) isClosing() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closing
}

// stop ends the writer without a close frame.
func (o *outbox) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return
	}
	o.closing = true
	o.done = true
	o.frames = nil
	close(o.stopped)
}

// next blocks until a frame is available; false means the writer must stop.
func (o *outbox) next() (outFrame, bool) {
	for {
		o.mu.Lock()
		if o.done {
			o.mu.Unlock()
			return outFrame{}, false
		}
		if len(o.frames) > 0 {
			f := o.frames[0]
			o.frames[0] = outFrame{}
			o.frames = o.frames[1:]
			o.bytes -= len(f.data)
			o.mu.Unlock()
			signal(o.space)
			return f, true
		}
		o.mu.Unlock()
		select {
		case <-o.wake:
		case <-o.stopped:
		}
	}
}
