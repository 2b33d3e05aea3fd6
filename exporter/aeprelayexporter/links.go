package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// relayLink is the WebSocket link of one agent identity: its hello names
// the agent, and only that agent's events travel on it. The link of the
// configured agent is dialled at start and kept, and is the only one that
// hands commands on; the links of other agents are opened on first use,
// closed when idle for link_idle_timeout, and at most max_links are open.
type relayLink struct {
	agent string
	// control is the control extension as this link presents it; nil on
	// the links of other agents: they declare accepts: [] and hand no
	// command on, as emitters never receive commands.
	control *controlLink
	stop    context.CancelFunc
	// done is closed when the link's manager exits.
	done chan struct{}

	mu      sync.Mutex
	conn    *relayConn    // nil while disconnected
	lastErr error         // why there is no connection
	changed chan struct{} // closed and replaced on every state change

	// Guarded by the transport's linksMu.
	users    int // pushes sending on the link now
	lastUsed time.Time
	idle     *time.Timer // closes the link once idle; nil while in use
}

func (l *relayLink) setState(conn *relayConn, lastErr error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conn, l.lastErr = conn, lastErr
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *relayLink) stopIdleTimer() {
	if l.idle != nil {
		l.idle.Stop()
		l.idle = nil
	}
}

// openLocked starts the link of agent; linksMu is held.
func (s *socketTransport) openLocked(agent string) *relayLink {
	ctx, stop := context.WithCancel(s.runCtx)
	l := &relayLink{agent: agent, stop: stop, done: make(chan struct{}), changed: make(chan struct{}), lastUsed: time.Now()}
	if agent == s.cfg.Agent {
		l.control = s.control
	}
	s.links[agent] = l
	s.tel.linksOpen.Add(ctx, 1)
	s.managers.Add(1)
	go func() {
		defer s.managers.Done()
		defer s.tel.linksOpen.Add(context.Background(), -1)
		s.run(ctx, l)
	}()
	return l
}

// closeLocked stops a link's manager, which closes its connection in
// order; linksMu is held and nobody uses the link.
func (s *socketTransport) closeLocked(l *relayLink, why string) {
	delete(s.links, l.agent)
	l.stopIdleTimer()
	l.stop()
	s.logger.Debug("closing the AEP relay link of an agent", zap.String("agent", l.agent), zap.String("why", why))
}

// errLinksBusy: every one of max_links links is sending.
var errLinksBusy = errors.New("every one of max_links AEP relay links is sending")

// acquire returns the link of agent, opening it on first use, for one
// push to send on; release gives it back. At max_links the least recently
// used idle link of another agent is closed to make room; when every link
// is busy, acquire waits for one to be released, up to ctx, or returns
// errLinksBusy at once unless wait.
func (s *socketTransport) acquire(ctx context.Context, agent string, wait bool) (*relayLink, error) {
	s.linksMu.Lock()
	defer s.linksMu.Unlock()
	for {
		select {
		case <-s.fatal:
			return nil, s.fatalErr
		default:
		}
		if s.stopped {
			return nil, errShutDown
		}
		l, ok := s.links[agent]
		if !ok && len(s.links) >= s.cfg.MaxLinks {
			if victim := s.leastRecentlyUsedLocked(); victim != nil {
				s.tel.linksEvicted.Add(ctx, 1)
				s.rate.Warn("links_evicted", "max_links AEP relay links are open: closing the least recently used to open one for another agent; raise max_links if this repeats",
					zap.Int("max_links", s.cfg.MaxLinks), zap.String("closed_agent", victim.agent), zap.String("agent", agent))
				s.closeLocked(victim, "max_links")
			}
		}
		if !ok && len(s.links) < s.cfg.MaxLinks {
			l, ok = s.openLocked(agent), true
		}
		if ok {
			l.users++
			l.stopIdleTimer()
			return l, nil
		}
		if !wait {
			return nil, errLinksBusy
		}
		released := s.released
		s.linksMu.Unlock()
		select {
		case <-released:
			s.linksMu.Lock()
		case <-s.fatal:
			s.linksMu.Lock()
		case <-ctx.Done():
			s.linksMu.Lock()
			return nil, fmt.Errorf("all max_links (%d) AEP relay links are sending; agent %q waits for one (raise max_links): %w", s.cfg.MaxLinks, agent, ctx.Err())
		}
	}
}

// leastRecentlyUsedLocked is the idle link of another agent used least
// recently, or nil; linksMu is held.
func (s *socketTransport) leastRecentlyUsedLocked() *relayLink {
	var victim *relayLink
	for _, l := range s.links {
		if l.agent == s.cfg.Agent || l.users > 0 {
			continue
		}
		if victim == nil || l.lastUsed.Before(victim.lastUsed) {
			victim = l
		}
	}
	return victim
}

// release gives back a link acquire returned. A link of another agent
// that nobody uses is closed after link_idle_timeout.
func (s *socketTransport) release(l *relayLink) {
	s.linksMu.Lock()
	defer s.linksMu.Unlock()
	l.users--
	l.lastUsed = time.Now()
	if l.users == 0 && l.agent != s.cfg.Agent && !s.stopped && s.links[l.agent] == l {
		l.idle = time.AfterFunc(s.cfg.LinkIdleTimeout, func() { s.closeIdle(l) })
	}
	close(s.released)
	s.released = make(chan struct{})
}

// closeIdle closes l if it is still open and has stayed unused for
// link_idle_timeout (a push may have taken it since the timer fired).
func (s *socketTransport) closeIdle(l *relayLink) {
	s.linksMu.Lock()
	defer s.linksMu.Unlock()
	if s.links[l.agent] != l || l.users > 0 || time.Since(l.lastUsed) < s.cfg.LinkIdleTimeout {
		return
	}
	s.closeLocked(l, "idle")
}

// refuseForGood records the relay's permanent refusal of this exporter and
// stops every link: the same hello, credentials and version travel on each.
func (s *socketTransport) refuseForGood(err error) {
	s.fatalOnce.Do(func() {
		s.fatalErr = err
		close(s.fatal)
		s.stop()
	})
}

// connected waits for l's connection, up to ctx.
func (s *socketTransport) connected(ctx context.Context, l *relayLink) (*relayConn, error) {
	for {
		l.mu.Lock()
		conn, lastErr, changed := l.conn, l.lastErr, l.changed
		l.mu.Unlock()
		select {
		case <-s.fatal:
			return nil, s.fatalErr
		default:
		}
		if conn != nil {
			select {
			case <-conn.closed: // failed; the manager is about to redial
			default:
				return conn, nil
			}
		}
		select {
		case <-changed:
		case <-s.fatal:
		case <-l.done:
			select {
			case <-s.fatal:
				return nil, s.fatalErr
			default:
				return nil, errShutDown
			}
		case <-ctx.Done():
			if lastErr != nil {
				return nil, fmt.Errorf("AEP relay link of agent %q not connected (%w): %w", l.agent, lastErr, ctx.Err())
			}
			return nil, fmt.Errorf("AEP relay link of agent %q not connected yet: %w", l.agent, ctx.Err())
		}
	}
}

// agentSessionsKept is how many of the sessions the link of agent carried
// are remembered: far more than one collector observes at once.
const agentSessionsKept = 4096

// claimedByAgent returns group, the events of one agent, less those the
// link of agent must keep to itself: the relay routes a command by its
// session alone, to the one connection that carried the session, so an
// event of another agent in a session the agent's link carries (anyone's
// OTLP export or aep POST may name it) would make a second claimant, and
// every command for the session would be refused as ambiguous. Such an
// event is dropped and counted; the agent's own events note their
// sessions. Without a control extension no command is taken, and every
// event is sent.
func (s *socketTransport) claimedByAgent(ctx context.Context, group []outboundEvent) []outboundEvent {
	if s.control == nil {
		return group
	}
	s.sessionsMu.Lock()
	defer s.sessionsMu.Unlock()
	if group[0].agent == s.cfg.Agent {
		for _, ev := range group {
			if ev.session != "" {
				s.agentSessions.Put(ev.session, struct{}{})
			}
		}
		return group
	}
	claimed := func(ev outboundEvent) bool { return ev.session != "" && s.agentSessions.Has(ev.session) }
	return dropEvents(group, claimed, func(ev outboundEvent) {
		s.drop(ctx, refusal{reason: reasonSessionClaimed, id: ev.id, typ: ev.typ, session: ev.session,
			err: fmt.Errorf("event of agent %q in session %q, which the link of agent %q carries: sent on a link of its own, it would make the relay refuse the session's commands as ambiguous; authenticate the receiver it came from (README: Security)", ev.agent, ev.session, s.cfg.Agent)})
	})
}
