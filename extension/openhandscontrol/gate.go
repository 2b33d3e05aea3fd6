package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/extension/extensioncapabilities"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
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
	id     component.ID
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
	exporters int // the exporters that hand the gate commands (Bind)
	seen      *dedupe
	unhealthy bool // the last write found its server unreachable
}

var (
	_ Registrar                             = (*gate)(nil)
	_ extensioncapabilities.PipelineWatcher = (*gate)(nil)
)

func newGate(id component.ID, cfg *Config, set component.TelemetrySettings) (*gate, error) {
	tel, err := newTelemetry(set)
	if err != nil {
		return nil, fmt.Errorf("create openhandscontrol telemetry: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &gate{
		id: id, cfg: cfg, logger: set.Logger, rl: ratelog.New(set.Logger, logEvery), tel: tel,
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

// Ready implements extensioncapabilities.PipelineWatcher: once every
// component has started, an open gate that no receiver registered with or
// no exporter bound to is told plainly, since it can then execute nothing.
func (g *gate) Ready() error {
	if !g.cfg.Enabled {
		return nil
	}
	g.mu.Lock()
	receivers, exporters := len(g.observers), g.exporters
	g.mu.Unlock()
	if receivers == 0 {
		g.logger.Warn("the OpenHands control gate is ON but no openhands receiver names it (control: "+g.id.String()+"): "+
			"no command can be routed to a conversation or acked", zap.String("extension", g.id.String()))
	}
	if exporters == 0 {
		g.logger.Warn("the OpenHands control gate is ON but no aeprelay exporter names it (control: "+g.id.String()+"): "+
			"no command reaches it", zap.String("extension", g.id.String()))
	}
	return nil
}

// NotReady implements extensioncapabilities.PipelineWatcher.
func (g *gate) NotReady() error { return nil }

// Bind implements the exporter's ControlHandler: an exporter hands the gate
// its commands.
func (g *gate) Bind() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.exporters++
}

// Register implements Registrar.
func (g *gate) Register(o Observer) (NewNotesFunc, func()) {
	if g.cfg.Enabled {
		for _, s := range o.Servers() {
			endpoint.WarnPlaintext(g.logger, "server "+s.Name, s.Base.String(), "control writes")
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	id := g.nextObs
	g.nextObs++
	g.observers[id] = o
	notesOf := func(view View, restored State) *Notes {
		n := newNotes(view, g.cfg.Enabled)
		n.restore(restored)
		return n
	}
	return notesOf, func() {
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
// slow pipeline never stalls the relay connection. raw is the frame the
// command came in, authenticated whether its relay link carries
// credentials.
func (g *gate) HandleCommand(_ context.Context, raw []byte, ev *aep.Event, authenticated bool) {
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
		g.spawn(ev, func() { g.execute(raw, ev, authenticated) }, func() { g.forget(k) })
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

// claims returns every observed conversation whose session is id: those of
// each registered receiver, in registration order, each receiver's in the
// order it first observed them.
func (g *gate) claims(id string) []Session {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Session
	for _, k := range slices.Sorted(maps.Keys(g.observers)) {
		out = append(out, g.observers[k].Sessions(id)...)
	}
	return out
}

// execute decides one command: one its conversation remembers is
// answered from there (answerRemembered); otherwise unsupported (the gate
// is off, its relay link is not authenticated, or the type is not among
// the five), invalid (malformed), refused (its session is claimed twice,
// or a guard), busy (a write to the conversation is in flight or over its
// rate), or forwarded as one REST write whose result the reply guard
// turns into the ack.
func (g *gate) execute(raw []byte, ev *aep.Event, authenticated bool) {
	k := commandKey{source: ev.Source, id: ev.ID}
	claims := g.claims(ev.Session)
	if len(claims) == 0 {
		g.forget(k)
		g.tel.command(g.ctx, ev.Type, outcomeUnroutable)
		g.rl.Warn("unroutable", "a command names a session no receiver registered with this gate observes; it cannot be acked (acks are sequenced events of the session)",
			zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("session", ev.Session))
		return
	}
	arrived := time.Now()
	if g.answerRemembered(ev.Type, k, claims, g.cfg.Enabled && authenticated, arrived.Add(g.cfg.ReplyGuard/2)) {
		return
	}
	// When two conversations claim the session (two agent servers list the
	// same id, or two receivers observe one server), the command addresses
	// only the session (AEP-0004 §2: no server, no target source), so no
	// write is made: which server was meant cannot be known. Its nack
	// still has to be sequenced in one session stream (one ack per
	// command), and every claimant's stream reaches the sender alike (the
	// relay keeps history by session); the first claim's (the first
	// registered receiver's earliest observed) is a choice that does not
	// depend on who listed the id last, and a redelivery re-sends the
	// recorded nack from it.
	sess := claims[0]
	f := &inflight{cmd: &command{id: ev.ID, source: ev.Source, agent: ev.Agent, session: ev.Session, typ: ev.Type}}
	f.decided = func(d decision) { g.record(k, sess, f.cmd.typ, d) }
	rej := g.admit(raw, ev, authenticated, f)
	if rej == nil && len(claims) > 1 {
		rej = g.conflict(ev, claims)
	}
	if rej != nil {
		sess.Control(g.ctx, func(n *Notes) []*aep.Event { return []*aep.Event{n.reject(f, rej, time.Now())} })
		return
	}
	g.decide(sess, f, arrived.Add(g.cfg.ReplyGuard))
}

// answerRemembered answers a command that a claiming conversation
// remembers while the gate does not (the collector restarted): a decided
// one with its recorded ack; one whose write was in flight when the
// collector stopped (a note restored undecided) with the ack the stream
// gives it on showing its outcome, awaited until by, when the command
// could be executed (trusted: the gate is on and its link authenticated).
// It reports whether the command is answered; a restored note still
// undecided by then is dropped, and the command judged afresh.
func (g *gate) answerRemembered(typ string, k commandKey, claims []Session, trusted bool, by time.Time) bool {
	for _, s := range claims {
		var d decision
		var recorded bool
		var f *inflight
		decided := make(chan struct{})
		s.Control(g.ctx, func(n *Notes) []*aep.Event {
			if d, recorded = n.recorded(k); recorded || !trusted {
				return nil
			}
			if f = n.restoredNote(k); f != nil {
				f.decided = func(d decision) {
					g.record(k, s, typ, d)
					close(decided)
				}
			}
			return nil
		})
		switch {
		case recorded:
			g.mu.Lock()
			g.seen.record(k, d, s)
			g.mu.Unlock()
			g.tel.command(g.ctx, typ, outcomeReacked)
			g.resend(s, d)
			return true
		case f != nil:
			return g.awaitShown(typ, s, f, decided, by)
		}
	}
	return false
}

// awaitShown waits, until by, for the stream to decide the restored note
// f (decided closes); the ack it gives answers every delivery. Past by,
// f is dropped unless decided meanwhile.
func (g *gate) awaitShown(typ string, s Session, f *inflight, decided <-chan struct{}, by time.Time) bool {
	wait := time.NewTimer(time.Until(by))
	defer wait.Stop()
	select {
	case <-decided:
	case <-g.ctx.Done():
	case <-wait.C:
		shown := false
		s.Control(g.ctx, func(n *Notes) []*aep.Event {
			if shown = f.decision.ack != nil; !shown {
				f.decided = nil
				n.disarm(f)
			}
			return nil
		})
		if !shown {
			return false
		}
	}
	g.tel.command(g.ctx, typ, outcomeDuplicate)
	return true
}

// decide runs the guards and, when they pass, the write. While another
// write to the conversation is in flight, the guards would read a status
// that write may be about to change: the command waits for its answer and
// is judged afresh, all within reply_guard of its arrival (so that its ack
// still arrives inside the window), or is refused busy.
func (g *gate) decide(sess Session, f *inflight, deadline time.Time) {
	for {
		var writing *inflight
		forwarded := false
		sess.Control(g.ctx, func(n *Notes) []*aep.Event {
			if rej := n.guard(f.cmd); rej != nil {
				return []*aep.Event{n.reject(f, rej, time.Now())}
			}
			if writing = n.writing; writing != nil {
				return nil
			}
			if rej := n.hold(f.cmd, g.cfg.ConversationRateLimit); rej != nil {
				return []*aep.Event{n.reject(f, rej, time.Now())}
			}
			n.arm(f)
			forwarded = true
			return nil
		})
		switch {
		case forwarded && g.save(sess, f):
			g.forward(sess, f, deadline)
			return
		case forwarded:
			return
		case writing == nil: // decided
			return
		}
		wait := time.NewTimer(time.Until(deadline))
		select {
		case <-writing.answered:
			wait.Stop()
		case <-wait.C:
			busy := &rejection{reason: reasonBusy, detail: fmt.Sprintf(
				"the write of %s (command %s) to this conversation has not answered within reply_guard; one write at a time", writing.cmd.typ, writing.cmd.id)}
			sess.Control(g.ctx, func(n *Notes) []*aep.Event { return []*aep.Event{n.reject(f, busy, time.Now())} })
			return
		case <-g.ctx.Done():
			wait.Stop()
			return
		}
	}
}

// save stores f's note with its conversation before its write is made,
// so that a restart can still decide it from the stream. A note storage
// refuses is not written: the command is rejected busy.
func (g *gate) save(sess Session, f *inflight) bool {
	err := sess.Save(g.ctx)
	if err == nil {
		return true
	}
	g.rl.Warn("save", "refusing a command: the receiver's storage could not record it before its write",
		zap.String("id", f.cmd.id), zap.String("type", f.cmd.typ), zap.String("session", f.cmd.session), zap.Error(err))
	busy := &rejection{reason: reasonBusy, detail: "the collector's storage could not record the command before its write; nothing was written"}
	sess.Control(g.ctx, func(n *Notes) []*aep.Event { return n.settle(f, result{rejection: busy}, time.Now()) })
	return false
}

// conflict refuses a command whose session more than one observed
// conversation claims: logged, counted, never routed to a guess.
func (g *gate) conflict(ev *aep.Event, claims []Session) *rejection {
	servers := make([]string, len(claims))
	for i, s := range claims {
		servers[i] = s.Server().Name
	}
	g.tel.conflicts.Add(g.ctx, 1)
	g.rl.Warn("conflict", "refusing a command: more than one observed conversation claims its session (the same id on several agent servers, or one server under several receivers)",
		zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("session", ev.Session), zap.Strings("servers", servers))
	return &rejection{reason: reasonRefused, detail: fmt.Sprintf(
		"session %s is claimed by %d observed conversations (the same id on more than one agent server); a command is executed only for a session exactly one conversation claims",
		ev.Session, len(claims))}
}

// admit checks what needs no session state: the gate is on, the command
// came over an authenticated relay link, the type is one of the five, the
// payload is well formed. On success f.cmd is the parsed command.
func (g *gate) admit(raw []byte, ev *aep.Event, authenticated bool, f *inflight) *rejection {
	if !g.cfg.Enabled {
		return &rejection{reason: reasonUnsupported, detail: "the OpenHands control gate is off: this collector accepts no commands"}
	}
	if !authenticated {
		// A relay link without credentials is one anyone can speak on (a
		// hostile relay, or anyone in the middle of ws://): it gets the
		// closed gate's answer, as its hello declared accepts: [].
		return &rejection{reason: reasonUnsupported, detail: "this collector's relay link sends no credentials: it accepts no commands over it"}
	}
	if _, ok := writes[ev.Type]; !ok {
		return &rejection{reason: reasonUnsupported, detail: fmt.Sprintf("%s is not among the accepted commands %v", ev.Type, accepted)}
	}
	cmd, rej := parseCommand(raw, ev, g.cfg.SendInputMaxChars)
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
func (g *gate) forward(sess Session, f *inflight, deadline time.Time) {
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
	guard := time.NewTimer(time.Until(deadline))
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
			zap.String("server", srv.Name), zap.Int("status", o.status), zap.String("detail", o.detail), zap.NamedError("transport_error", o.err))
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
