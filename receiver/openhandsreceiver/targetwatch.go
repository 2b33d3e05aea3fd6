package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import "context"

// release lets go of a retired target's conversations once its run has
// returned (so no other goroutine holds them): end ends their sessions,
// else they only leave the control index, their sessions open.
func (w *serverWatch) release(ctx context.Context, end bool) {
	for _, c := range w.convs {
		if end {
			w.endSession(ctx, c)
		} else {
			w.index.remove(c.session)
		}
	}
}

// countByServer counts the live sessions of each server.
func (x *sessionIndex) countByServer() map[*serverClient]int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := make(map[*serverClient]int)
	for _, claims := range x.sessions {
		for _, s := range claims {
			n[s.server]++
		}
	}
	return n
}
