package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
	"github.com/otelcol-openhands/otelcol-openhands/internal/recent"
)

// errShutDown fails pushes that outlive the connection managers.
var errShutDown = errors.New("aeprelay exporter is shut down")

// socketTransport is the WebSocket binding: one link per agent identity
// (AEP-0003 §8 allows one per connection), each with its own hello,
// connection manager and confirmations (links.go). A link's manager dials,
// says hello, reads every inbound frame and redials with backoff; a push
// splits its events by agent, writes each part on its link and confirms
// each with a ping/pong round trip.
type socketTransport struct {
	cfg     *Config
	logger  *zap.Logger
	rate    *ratelog.Logger
	tel     *telemetry
	status  *statusReporter
	relay   socketEndpoint
	pingSeq atomic.Int64
	// drop reports an event dropped from a push that goes on: the relay
	// refused it, or no link may carry its agent.
	drop func(context.Context, refusal)

	// Set by start.
	dialer   websocket.Dialer
	auth     http.RoundTripper // the auth extension's chain, ending in headerCapture
	control  *controlLink      // nil without a control key
	instance string
	runCtx   context.Context // every link's manager runs under it
	stop     context.CancelFunc
	managers sync.WaitGroup

	linksMu sync.Mutex
	links   map[string]*relayLink // by agent
	stopped bool
	// released is closed and replaced whenever a link is released.
	released chan struct{}

	// agentSessions are the sessions the link of agent carried last; an
	// event of another agent in one of them is not sent (claimedByAgent).
	sessionsMu    sync.Mutex
	agentSessions recent.Window[struct{}]

	fatalOnce sync.Once
	fatalErr  error
	// fatal is closed once the relay refused this exporter for good
	// (fatalErr); every link's manager stops.
	fatal chan struct{}
}

func newSocketTransport(cfg *Config, logger *zap.Logger, rate *ratelog.Logger, tel *telemetry, status *statusReporter, drop func(context.Context, refusal)) (*socketTransport, error) {
	relay, err := newSocketEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	return &socketTransport{
		cfg: cfg, logger: logger, rate: rate, tel: tel, status: status, drop: drop,
		relay: relay, links: make(map[string]*relayLink), released: make(chan struct{}), fatal: make(chan struct{}),
		agentSessions: recent.New[struct{}](agentSessionsKept),
	}, nil
}

func (s *socketTransport) start(ctx context.Context, host component.Host) error {
	tlsCfg, err := s.cfg.TLS.LoadTLSConfig(ctx)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	proxy := http.ProxyFromEnvironment
	if s.cfg.ProxyURL != "" {
		u, perr := url.ParseRequestURI(s.cfg.ProxyURL)
		if perr != nil {
			return fmt.Errorf("proxy_url: %w", perr)
		}
		proxy = http.ProxyURL(u)
	}
	s.dialer = websocket.Dialer{
		Proxy:            proxy,
		TLSClientConfig:  tlsCfg,
		HandshakeTimeout: s.cfg.HelloTimeout,
		ReadBufferSize:   s.cfg.ReadBufferSize,
		WriteBufferSize:  s.cfg.WriteBufferSize,
	}
	if s.cfg.Auth.HasValue() {
		client, aerr := s.cfg.Auth.Get().GetHTTPClientAuthenticator(ctx, host.GetExtensions())
		if aerr != nil {
			return fmt.Errorf("auth: %w", aerr)
		}
		if s.auth, aerr = client.RoundTripper(headerCapture{}); aerr != nil {
			return fmt.Errorf("auth: %w", aerr)
		}
	}
	if s.cfg.Control != nil {
		h, ferr := findControlHandler(*s.cfg.Control, host.GetExtensions())
		if ferr != nil {
			return ferr
		}
		h.Bind()
		s.control = &controlLink{handler: h, authenticated: len(s.cfg.credentials()) > 0}
		if len(h.Accepts()) > 0 && !s.control.authenticated {
			s.logger.Warn("control: the gate is open but this exporter sends the relay no credentials; "+
				"the hello declares accepts: [] and every command is rejected unsupported (set token or auth)", zap.String("relay", s.relay.display))
		}
	}
	s.instance = s.cfg.Instance
	if s.instance == "" {
		hostname, herr := os.Hostname()
		if herr != nil {
			hostname = "unknown"
		}
		s.instance = fmt.Sprintf("%s/%d", hostname, os.Getpid())
	}
	// The managers outlive Start's context; shutdown stops them. The
	// agent's link is dialled now: commands reach it even before the
	// first event.
	s.runCtx, s.stop = context.WithCancel(context.Background())
	s.linksMu.Lock()
	defer s.linksMu.Unlock()
	s.openLocked(s.cfg.Agent)
	return nil
}

func (s *socketTransport) shutdown(ctx context.Context) error {
	if s.stop == nil {
		return nil
	}
	s.linksMu.Lock()
	s.stopped = true
	for _, l := range s.links {
		l.stopIdleTimer()
	}
	close(s.released) // a push waiting for a link sees stopped
	s.released = make(chan struct{})
	s.linksMu.Unlock()
	s.stop()
	done := make(chan struct{})
	go func() {
		s.managers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close the AEP relay links: %w", ctx.Err())
	}
}

// nextPing returns a fresh t and its key.
func (s *socketTransport) nextPing() (json.RawMessage, string) {
	t := strconv.FormatInt(s.pingSeq.Add(1), 10)
	return json.RawMessage(t), t
}

// send splits a push's events by agent and delivers each part on its
// agent's link: written in order, then confirmed by the pong of a ping
// written after it. The push succeeds once every part is confirmed. An
// event the relay refused by an error frame naming it is dropped, counted
// and logged, and never resent: the same bytes would be refused again.
// Any other failure of a part is retryable and carries only the events of
// the parts not confirmed: exporterhelper resends the same ids, and the
// relay dedupes buffer admission on (source, id).
func (s *socketTransport) send(ctx context.Context, src *pushSource) error {
	d := delivery{s: s, parts: make(map[string]*linkBatch), failed: make(map[string]error)}
	deadline := writeDeadline(ctx, s.cfg.ConfirmTimeout)
	for chunk := src.take(writeChunk); len(chunk) > 0; chunk = src.take(writeChunk) {
		for _, group := range byAgent(chunk) {
			if group = s.claimedByAgent(ctx, s.fitFrame(ctx, group)); len(group) == 0 {
				continue
			}
			p := d.part(ctx, group[0].agent)
			if p == nil {
				for _, ev := range group {
					s.refuseAgent(ctx, ev)
				}
				continue
			}
			p.write(deadline, group)
		}
	}
	d.finish(ctx)
	return d.result()
}

// fitFrame returns group less the events whose frame is over maxFrame,
// which are dropped: the relay closes a socket that sends one (1009), so
// the push would fail at every retry and hold the queue behind it.
func (s *socketTransport) fitFrame(ctx context.Context, group []outboundEvent) []outboundEvent {
	tooLarge := func(ev outboundEvent) bool { return len(ev.raw) > maxFrame }
	return dropEvents(group, tooLarge, func(ev outboundEvent) {
		s.drop(ctx, refusal{reason: reasonTooLarge, id: ev.id, typ: ev.typ, session: ev.session,
			err: fmt.Errorf("the event is %d bytes, over the %d a relay socket frame may hold (AEP_MAX_BODY)", len(ev.raw), maxFrame)})
	})
}

// dropEvents returns group less the events doomed reports, each of which
// it hands to drop, in order. group may be a view of the push's own
// events (byAgent), which stay as they are: the events kept are a copy
// when any is dropped, group itself otherwise.
func dropEvents(group []outboundEvent, doomed func(outboundEvent) bool, drop func(outboundEvent)) []outboundEvent {
	if !slices.ContainsFunc(group, doomed) {
		return group
	}
	kept := make([]outboundEvent, 0, len(group))
	for _, ev := range group {
		if doomed(ev) {
			drop(ev)
			continue
		}
		kept = append(kept, ev)
	}
	return kept
}

// refuseAgent drops an event of another agent when max_links opens no
// link for it.
func (s *socketTransport) refuseAgent(ctx context.Context, ev outboundEvent) {
	s.drop(ctx, refusal{reason: reasonAgentMismatch, id: ev.id, typ: ev.typ, session: ev.session,
		err: fmt.Errorf("event agent %q is not agent %q, and max_links: 1 opens no link for another agent (raise max_links, or set transport: http)", ev.agent, s.cfg.Agent)})
}

// byAgent splits a chunk by agent, each group in chunk order. A chunk of
// one agent, the usual one, is its own group, not a copy: the groups are
// only read.
func byAgent(chunk []outboundEvent) [][]outboundEvent {
	if !slices.ContainsFunc(chunk, func(ev outboundEvent) bool { return ev.agent != chunk[0].agent }) {
		return [][]outboundEvent{chunk}
	}
	var groups [][]outboundEvent
	at := make(map[string]int, 1)
	for _, ev := range chunk {
		i, ok := at[ev.agent]
		if !ok {
			i = len(groups)
			at[ev.agent] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], ev)
	}
	return groups
}

// delivery is one push on its way: a part per agent, and what the parts
// already finished left to send.
type delivery struct {
	s     *socketTransport
	parts map[string]*linkBatch
	order []*linkBatch
	// errs and pending are the failures of finished parts and their
	// events still to be sent.
	errs    []error
	pending []outboundEvent
	// failed holds the agents whose finished part failed: the rest of
	// their events wait for the retry, behind the failed ones.
	failed map[string]error
}

// linkBatch is the part of a push that travels on one agent's link.
type linkBatch struct {
	agent string
	link  *relayLink // nil when no link could be had (err says why)
	conn  *relayConn
	wait  *batchWait
	// groups are every event of the part, written or not, in order: the
	// groups send gave it as they came (views of the push's events, or
	// byAgent's copies), never copied again; n counts their events.
	groups [][]outboundEvent
	n      int
	// first is when its first frame was written.
	first time.Time
	// err is why the part failed; its events (less those the relay
	// refused) are still to be sent.
	err error
}

// part is the part of agent, its link acquired and connected on first
// use; nil when max_links opens no link for it. When every link is taken
// and this push holds some, its parts so far are finished first, so that
// a push with more agents than max_links goes out a few links at a time.
func (d *delivery) part(ctx context.Context, agent string) *linkBatch {
	s := d.s
	if p, ok := d.parts[agent]; ok {
		return p
	}
	if agent != s.cfg.Agent && s.cfg.MaxLinks == 1 {
		return nil
	}
	p := &linkBatch{agent: agent, err: d.failed[agent]}
	if p.err == nil {
		p.link, p.err = s.acquire(ctx, agent, len(d.order) == 0)
		if errors.Is(p.err, errLinksBusy) {
			d.finish(ctx)
			p.link, p.err = s.acquire(ctx, agent, true)
		}
	}
	d.parts[agent] = p
	d.order = append(d.order, p)
	if p.err != nil {
		return p
	}
	if p.conn, p.err = s.connected(ctx, p.link); p.err != nil {
		return p
	}
	_, token := s.nextPing()
	p.wait = p.conn.await(token)
	return p
}

// write sends events on the part's link; after a failure it only keeps
// them, as still to be sent.
func (p *linkBatch) write(deadline time.Time, events []outboundEvent) {
	p.groups = append(p.groups, events)
	p.n += len(events)
	if p.err != nil {
		return
	}
	if p.first.IsZero() {
		p.first = time.Now()
	}
	if err := p.conn.writeEvents(deadline, p.wait, events); err != nil {
		p.fail(fmt.Errorf("write events to the AEP relay (%d of the batch so far): %w", p.n, err))
	}
}

// fail fails the part and drops its connection: what it wrote is
// unconfirmed, and a stuck relay needs a redial.
func (p *linkBatch) fail(err error) {
	p.err = err
	p.conn.fail(err)
}

// finish confirms the current parts, accounts for them and gives their
// links back.
func (d *delivery) finish(ctx context.Context) {
	d.confirm(ctx)
	for _, p := range d.order {
		var refused map[string]relayRefusal
		if p.wait != nil {
			refused = p.conn.settle(p.wait, p.groups)
		}
		if p.link != nil {
			d.s.release(p.link)
		}
		unsent := d.s.settle(ctx, p.groups, refused, p.err)
		if p.err != nil {
			if d.failed[p.agent] == nil {
				d.errs = append(d.errs, p.err)
				d.failed[p.agent] = p.err
			}
			d.pending = append(d.pending, unsent...)
		}
	}
	clear(d.parts)
	d.order = d.order[:0]
}

// confirm writes each current part's ping, then waits for their pongs,
// which confirm the parts in parallel.
func (d *delivery) confirm(ctx context.Context) {
	deadline := writeDeadline(ctx, d.s.cfg.ConfirmTimeout)
	for _, p := range d.order {
		if p.err != nil {
			continue
		}
		if err := p.conn.writeJSON(deadline, pingFrame{Type: framePing, T: json.RawMessage(p.wait.token)}); err != nil {
			p.fail(fmt.Errorf("write events to the AEP relay (%d of the batch so far): %w", p.n, err))
		}
	}
	// One confirm_timeout for every part: their pongs come in parallel.
	expired := make(chan struct{})
	timer := time.AfterFunc(d.s.cfg.ConfirmTimeout, func() { close(expired) })
	defer timer.Stop()
	for _, p := range d.order {
		if p.err != nil {
			continue
		}
		n := p.n
		select {
		case <-p.wait.pong: // confirmed while an earlier part was waited for
			d.s.tel.confirmed(ctx, p.first)
			continue
		default:
		}
		select {
		case <-p.wait.pong:
			d.s.tel.confirmed(ctx, p.first)
		case <-p.conn.closed:
			p.err = fmt.Errorf("AEP relay connection lost before it confirmed %d events: %w", n, p.conn.cause())
		case <-expired:
			// A relay that answers no ping is stuck: redial.
			p.fail(fmt.Errorf("AEP relay did not confirm %d events within confirm_timeout (%s)", n, d.s.cfg.ConfirmTimeout))
		case <-ctx.Done():
			p.err = fmt.Errorf("wait for the AEP relay to confirm %d events: %w", n, ctx.Err())
		}
	}
}

// result is the push's outcome once every part is finished: nil when
// each was confirmed; otherwise the failures, carrying the events still to
// be sent in record order (a permanent failure carries none).
func (d *delivery) result() error {
	if len(d.errs) == 0 {
		return nil
	}
	err := errors.Join(d.errs...)
	if consumererror.IsPermanent(err) {
		return err
	}
	slices.SortFunc(d.pending, func(a, b outboundEvent) int {
		return cmp.Or(cmp.Compare(a.record.Resource, b.record.Resource),
			cmp.Compare(a.record.Scope, b.record.Scope), cmp.Compare(a.record.Record, b.record.Record))
	})
	return &unsentError{err: err, pending: d.pending}
}

// settle drops the events of a part the relay refused, counts the rest as
// sent when err is nil, and returns them otherwise.
func (s *socketTransport) settle(ctx context.Context, groups [][]outboundEvent, refused map[string]relayRefusal, err error) []outboundEvent {
	var rest []outboundEvent
	sent := 0
	for _, group := range groups {
		for _, ev := range group {
			if r, ok := refused[ev.id]; ok {
				s.drop(ctx, ev.refusedByRelay(reasonRelayRefused, r.code, r.detail))
				continue
			}
			sent++
			if err != nil {
				rest = append(rest, ev)
			}
		}
	}
	if err == nil {
		s.tel.sent(ctx, sent)
		return nil
	}
	return rest
}

func writeDeadline(ctx context.Context, fallback time.Duration) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(fallback)
}
