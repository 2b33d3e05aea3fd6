package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/ratelog"
)

const (
	// maxInFlight bounds the commands executing at once; past it a command
	// is dropped (logged and counted), and its sender's window expires.
	maxInFlight = 256
	// logEvery is how often one cause of trouble may be logged.
	logEvery = time.Minute
)

// gate is the extension: the exporter's ControlHandler and the
// receivers' Registrar.
type gate struct {
	cfg    *Config
	logger *zap.Logger
	rl     *ratelog.Logger
	tel    *telemetry

	host   component.Host
	ctx    context.Context // the gate's lifetime: commands outlive their connection
	cancel context.CancelFunc
	work   sync.WaitGroup
	slots  chan struct{}

	// mu guards what follows. It is taken under a conversation's lock
	// (record), never the other way round.
	mu        sync.Mutex
	observers map[int]Observer
	nextObs   int
	seen      *dedupe
	unhealthy bool // the last write found its server unreachable
}

var _ Registrar = (*gate)(nil)

func newGate(cfg *Config, set component.TelemetrySettings) (*gate, error) {
	tel, err := newTelemetry(set)
	if err != nil {
		return nil, fmt.Errorf("create openhandscontrol telemetry: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &gate{
		cfg: cfg, logger: set.Logger, rl: ratelog.New(set.Logger, logEvery), tel: tel,
		ctx: ctx, cancel: cancel, slots: make(chan struct{}, maxInFlight),
		observers: make(map[int]Observer), seen: newDedupe(dedupeCapacity),
	}, nil
}

func (g *gate) Start(_ context.Context, host component.Host) error {
	g.host = host
	if g.cfg.Enabled {
		g.logger.Warn("the OpenHands control gate is ON: relayed commands will drive conversations through the agent servers' REST API with their session keys",
			zap.Strings("accepts", accepted))
	}
	return nil
}

// Shutdown cancels the commands still executing and waits for them.
func (g *gate) Shutdown(ctx context.Context) error {
	g.cancel()
	done := make(chan struct{})
	go func() {
		g.work.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("openhandscontrol shutdown: %w", ctx.Err())
	}
}

// Register implements Registrar.
func (g *gate) Register(o Observer) (answerable bool, unregister func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := g.nextObs
	g.nextObs++
	g.observers[id] = o
	return g.cfg.Enabled, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.observers, id)
	}
}

// Accepts is the hello's capabilities.control.accepts: the five commands
// when the gate is on, none when it is off.
func (g *gate) Accepts() []string {
	if !g.cfg.Enabled {
		return []string{}
	}
	return slices.Clone(accepted)
}

// AckWindow is the hello's ack_window_ms.
func (g *gate) AckWindow() time.Duration { return g.cfg.AckWindow }

// HandleCommand takes one command off the exporter's read loop: it only
// dedupes, then hands the command to a worker, so a slow agent server or a
// slow pipeline never stalls the relay connection.
func (g *gate) HandleCommand(_ context.Context, _ []byte, ev *aep.Event) {
	if g.ctx.Err() != nil {
		return
	}
	k := commandKey{source: ev.Source, id: ev.ID}
	g.mu.Lock()
	e, fresh := g.seen.admit(k)
	var recorded decision
	var sess Session
	if !fresh {
		recorded, sess = e.decision, e.session
	}
	g.mu.Unlock()
	switch {
	case !fresh && recorded.ack == nil:
		// The one forthcoming ack answers every delivery.
		g.tel.command(g.ctx, ev.Type, outcomeDuplicate)
	case !fresh:
		g.tel.command(g.ctx, ev.Type, outcomeReacked)
		g.spawn(ev, func() { g.resend(sess, recorded) }, nil)
	default:
		g.spawn(ev, func() { g.execute(ev) }, func() { g.forget(k) })
	}
}

// spawn runs fn on a worker, or drops the command when maxInFlight
// commands are already executing (dropped runs first).
func (g *gate) spawn(ev *aep.Event, fn, dropped func()) {
	select {
	case g.slots <- struct{}{}:
	default:
		if dropped != nil {
			dropped()
		}
		g.tel.command(g.ctx, ev.Type, outcomeOverloaded)
		g.rl.Warn("overloaded", "dropping a command: too many commands executing", zap.Int("max_in_flight", maxInFlight),
			zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("session", ev.Session))
		return
	}
	g.work.Go(func() {
		defer func() { <-g.slots }()
		fn()
	})
}

// resend answers a redelivered command with its recorded ack, unchanged.
func (g *gate) resend(sess Session, d decision) {
	sess.Resend(g.ctx, d.ack)
	g.tel.ack(g.ctx, d, true)
}

func (g *gate) forget(k commandKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen.forget(k)
}

// session finds the registered observer of a session.
func (g *gate) session(id string) (Session, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range g.observers {
		if s, ok := o.Session(id); ok {
			return s, true
		}
	}
	return nil, false
}

// execute decides one command: unsupported (the gate is off, or the type
// is not among the five), invalid (malformed), refused by a guard, or
// forwarded as one REST write whose result the reply guard turns into the
// ack.
func (g *gate) execute(ev *aep.Event) {
	k := commandKey{source: ev.Source, id: ev.ID}
	sess, ok := g.session(ev.Session)
	if !ok {
		g.forget(k)
		g.tel.command(g.ctx, ev.Type, outcomeUnroutable)
		g.rl.Warn("unroutable", "a command names a session no receiver registered with this gate observes; it cannot be acked (acks are sequenced events of the session)",
			zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("session", ev.Session))
		return
	}
	f := &inflight{cmd: &command{id: ev.ID, source: ev.Source, agent: ev.Agent, session: ev.Session, typ: ev.Type}}
	f.decided = func(d decision) { g.record(k, sess, f.cmd.typ, d) }
	if rej := g.admit(ev, f); rej != nil {
		sess.Control(g.ctx, func(n *Notes) []*aep.Event { return []*aep.Event{n.reject(f, rej, time.Now())} })
		return
	}
	forwarded := false
	sess.Control(g.ctx, func(n *Notes) []*aep.Event {
		if rej := n.guard(f.cmd); rej != nil {
			return []*aep.Event{n.reject(f, rej, time.Now())}
		}
		n.arm(f)
		forwarded = true
		return nil
	})
	if forwarded {
		g.forward(sess, f)
	}
}

// admit checks what needs no session state: the gate is on, the type is
// one of the five, the payload is well formed. On success f.cmd is the
// parsed command.
func (g *gate) admit(ev *aep.Event, f *inflight) *rejection {
	if !g.cfg.Enabled {
		return &rejection{reason: reasonUnsupported, detail: "the OpenHands control gate is off: this collector accepts no commands"}
	}
	if _, ok := writes[ev.Type]; !ok {
		return &rejection{reason: reasonUnsupported, detail: fmt.Sprintf("%s is not among the accepted commands %v", ev.Type, accepted)}
	}
	cmd, rej := parseCommand(ev, g.cfg.SendInputMaxChars)
	if rej != nil {
		return rej
	}
	f.cmd = cmd
	return nil
}

// forward makes the REST write under the reply guard: its result settles
// the ack, unless the guard expires first, which acks control.accepted
// (will try) and lets the result still drop the note or, at 2xx, emit the
// send_input outcome.
func (g *gate) forward(sess Session, f *inflight) {
	srv := sess.Server()
	w := writes[f.cmd.typ](f.cmd)
	answer := make(chan writeOutcome, 1)
	start := time.Now()
	g.work.Go(func() {
		o := writeAgentServer(g.ctx, srv, w)
		g.report(srv, o)
		g.tel.wrote(g.ctx, f.cmd.typ, o, start)
		answer <- o
	})
	guard := time.NewTimer(g.cfg.ReplyGuard)
	defer guard.Stop()
	var o writeOutcome
	select {
	case o = <-answer:
	case <-guard.C:
		g.logger.Info("the agent server has not answered within reply_guard; acking will-try",
			zap.String("id", f.cmd.id), zap.String("type", f.cmd.typ), zap.String("server", srv.Name))
		sess.Control(g.ctx, func(n *Notes) []*aep.Event { return n.settle(f, result{willTry: true}, time.Now()) })
		o = <-answer
	}
	if o.status/100 != 2 {
		g.rl.Warn("write:"+srv.Name, "a control write failed", zap.String("id", f.cmd.id), zap.String("type", f.cmd.typ),
			zap.String("server", srv.Name), zap.Int("status", o.status))
	}
	sess.Control(g.ctx, func(n *Notes) []*aep.Event { return n.settle(f, o.result(), time.Now()) })
}

// record remembers a command's decision for its redeliveries and counts
// it. It runs under the conversation's lock (inflight.decided).
func (g *gate) record(k commandKey, sess Session, typ string, d decision) {
	g.mu.Lock()
	first := g.seen.record(k, d, sess)
	g.mu.Unlock()
	if first {
		g.tel.decided(g.ctx, typ, d)
	}
}

// report folds write reachability into the component status, on change:
// an unreachable agent server is a recoverable error until a write
// reaches one again.
func (g *gate) report(srv Server, o writeOutcome) {
	g.mu.Lock()
	unreachable := o.status == 0
	changed := unreachable != g.unhealthy
	g.unhealthy = unreachable
	g.mu.Unlock()
	if !changed || g.host == nil {
		return
	}
	if unreachable {
		componentstatus.ReportStatus(g.host, componentstatus.NewRecoverableErrorEvent(
			fmt.Errorf("agent server %s unreachable for a control write: %s", srv.Name, o.detail)))
		return
	}
	componentstatus.ReportStatus(g.host, componentstatus.NewEvent(componentstatus.StatusOK))
}
