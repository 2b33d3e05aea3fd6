package crashtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
)

const (
	stubKey    = "crashtest-session-key"
	relayToken = "crashtest-relay-token"

	// seed fixes the kill schedule: the same pauses and the same kills on
	// every run.
	seed = 8
	// kills is how many times the collector is killed while the
	// conversations stream.
	kills = 6
	// conversations stream in parallel, runsEach runs of toolsPerRun tool
	// calls each, one vendor event per pace.
	conversations = 3
	runsEach      = 10
	toolsPerRun   = 6
	pace          = 10 * time.Millisecond

	// deliveredWithin bounds the wait for everything to reach the relay.
	deliveredWithin = 90 * time.Second
)

// TestKill9 streams long scripted conversations through the built
// collector and kills it with SIGKILL at random points, restarting it each
// time; then kills and restarts the relay; then restarts the agent server
// with runs in flight. At the end, at the relay: every vendor event
// arrived, each AEP event once after (source, id) dedupe, no id and no
// (source, epoch, seq) position names two events, each session's positions
// are gap free, every run has exactly one terminal, and the stream checker
// found nothing, or, with a persistent exporter queue, nothing but
// backfills (see setups).
func TestKill9(t *testing.T) {
	bin := collectorBinary(t)
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) { killAndRestart(t, bin, s) })
	}
}

// setup is one way of running the receiver and the exporter beside the
// receiver's storage.
type setup struct {
	name   string
	socket string // the receiver's servers[].socket
	queue  string // the exporter's sending_queue
	// backfills: the queue may deliver a position after later ones of its
	// session. A persistent queue moves the request it was sending when
	// killed to the back of the queue on restart, behind later requests of
	// the same session; the relay's stream checker, which judges arrival
	// order, calls that an ordering violation, AEP-0001 §7 rule 2 a
	// backfill the consumer orders normally.
	backfills bool
}

const (
	persistentQueue = `
      storage: file_storage
      queue_size: 100000`
	// noQueue: the receiver's ConsumeLogs returns once the relay confirmed
	// the batch, so its write-ahead batch covers the crash and order holds.
	noQueue = `
      enabled: false`
)

var setups = []setup{
	{name: "session_socket/persistent_queue", socket: "session", queue: persistentQueue, backfills: true},
	{name: "session_socket/no_queue", socket: "session", queue: noQueue},
	// The legacy socket resumes from a timestamp with an overlap, which
	// the stored window of recent ids must absorb.
	{name: "events_socket/no_queue", socket: "events", queue: noQueue},
}

// rig is what a collector under test runs between: a stub agent server,
// a test relay, the collector's configuration (storage in a directory of
// the test) and its log.
type rig struct {
	dir     string
	stub    *oh.Server
	relay   *aeprelaytest.Relay
	config  string
	logPath string
	logFile *os.File
	// sessions is the aepfile exporter's directory.
	sessions string
}

func newRig(t *testing.T, setup setup) *rig {
	t.Helper()
	dir := t.TempDir()
	storageDir := filepath.Join(dir, "storage")
	if err := os.Mkdir(storageDir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := &rig{
		dir:   dir,
		stub:  oh.Start(t, oh.Config{SessionAPIKeys: []string{stubKey}}),
		relay: aeprelaytest.Start(t, aeprelaytest.Config{Token: relayToken, DrainTimeout: time.Second}),
		// The aepfile exporter's session logs.
		sessions: filepath.Join(dir, "sessions"),
	}
	r.config = r.writeConfig(t, "config.yaml", collectorConfig(storageDir, r.stub.URL(), setup.socket, r.relay.URL(), setup.queue, r.sessions))
	r.logPath = filepath.Join(dir, "collector.log")
	var err error
	if r.logFile, err = os.Create(r.logPath); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.logFile.Close()
		if t.Failed() {
			t.Logf("collector log (tail):\n%s", logTail(r.logPath, 60))
		}
	})
	return r
}

// writeConfig writes a configuration file of the rig and returns its path.
func (r *rig) writeConfig(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(r.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func killAndRestart(t *testing.T, bin string, setup setup) {
	r := newRig(t, setup)
	stub, relay, config, logFile, logPath, sessionsDir := r.stub, r.relay, r.config, r.logFile, r.logPath, r.sessions

	var convs []*oh.Conversation
	for range conversations {
		c, err := stub.CreateConversation(oh.ConversationOptions{})
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, c)
	}
	col := startCollector(t, bin, logFile, config)
	defer func() { col.stop() }()
	restart := func() {
		if !col.Running() {
			t.Fatalf("the collector exited on its own:\n%s", logTail(logPath, 30))
		}
		col.kill9(t)
		col = startCollector(t, bin, logFile, config)
	}

	// Phase 1: kill -9 at random points while every conversation streams.
	rng := rand.New(rand.NewPCG(seed, seed))
	done := playAll(convs, func(c *oh.Conversation) error { return playRuns(c, 0, runsEach) })
	for i := range kills {
		time.Sleep(time.Duration(150+rng.IntN(450)) * time.Millisecond)
		restart()
		t.Logf("kill -9 #%d: %d vendor events produced, %d AEP events at the relay", i+1, produced(convs), len(relay.Events()))
	}
	if err := <-done; err != nil {
		t.Fatalf("script: %v", err)
	}
	awaitDelivered(t, relay, convs)

	// Phase 2: the relay dies (connections cut, refused while down), the
	// conversations go on, the relay comes back with its state.
	relay.SetDown(true)
	relay.DropConnections()
	if err := <-playAll(convs, func(c *oh.Conversation) error { return playRuns(c, runsEach, runsEach+1) }); err != nil {
		t.Fatalf("script: %v", err)
	}
	restart() // and the collector dies while the relay is away
	if err := relay.Restart(aeprelaytest.KeepState); err != nil {
		t.Fatal(err)
	}
	relay.SetDown(false)
	awaitDelivered(t, relay, convs)

	// Phase 3: the agent server restarts with a tool call in flight in every
	// conversation: it recovers each run as error (AgentErrorEvent), and a
	// last run follows.
	if err := <-playAll(convs, startRunMidTool); err != nil {
		t.Fatalf("script: %v", err)
	}
	if err := stub.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := <-playAll(convs, func(c *oh.Conversation) error { return playRuns(c, runsEach+1, runsEach+2) }); err != nil {
		t.Fatalf("script: %v", err)
	}
	awaitDelivered(t, relay, convs)
	settle(relay)
	// The file exporter's queue keeps what it holds at shutdown for the
	// next start: wait for the logs to hold everything first.
	awaitSessionLogs(t, sessionsDir, relay)
	col.stop()

	verify(t, relay, convs, runsEach+2+1, setup.backfills)
	verifySessionLogs(t, sessionsDir, relay, convs)
}

// playAll runs play on every conversation in parallel and reports the
// first error once all are done.
func playAll(convs []*oh.Conversation, play func(*oh.Conversation) error) <-chan error {
	out := make(chan error, 1)
	var wg sync.WaitGroup
	errs := make([]error, len(convs))
	for i, c := range convs {
		wg.Go(func() { errs[i] = play(c) })
	}
	go func() {
		wg.Wait()
		out <- errors.Join(errs...)
	}()
	return out
}

// playRuns plays runs [from, to): a user message, running, tool calls
// (every other run holds one for confirmation), the agent's answer, and
// the run finishing.
func playRuns(c *oh.Conversation, from, to int) error {
	step := func(err error) error {
		time.Sleep(pace)
		return err
	}
	for run := from; run < to; run++ {
		if _, err := c.SendUserMessage(fmt.Sprintf("task %d", run), false); step(err) != nil {
			return err
		}
		if _, err := c.SetStatus(oh.StatusRunning); step(err) != nil {
			return err
		}
		for tool := range toolsPerRun {
			act, err := c.Append(oh.TerminalAction(fmt.Sprintf("step %d.%d", run, tool)))
			if step(err) != nil {
				return err
			}
			if run%2 == 1 && tool == 0 {
				if _, err := c.SetStatus(oh.StatusWaitingForConfirmation); step(err) != nil {
					return err
				}
				if _, err := c.SetStatus(oh.StatusRunning); step(err) != nil {
					return err
				}
			}
			if _, err := c.Append(oh.ObservationEvent(act, "ok", tool == toolsPerRun-1)); step(err) != nil {
				return err
			}
		}
		if _, err := c.Append(oh.MessageEvent("agent", fmt.Sprintf("done %d", run))); step(err) != nil {
			return err
		}
		if err := c.FinishRun(oh.StatusFinished); step(err) != nil {
			return err
		}
	}
	return nil
}

// startRunMidTool leaves a run with a tool call in flight.
func startRunMidTool(c *oh.Conversation) error {
	if _, err := c.SendUserMessage("long task", false); err != nil {
		return err
	}
	if _, err := c.SetStatus(oh.StatusRunning); err != nil {
		return err
	}
	_, err := c.Append(oh.TerminalAction("sleep 3600"))
	return err
}

// awaitDelivered waits until every vendor event of every conversation
// has reached the relay.
func awaitDelivered(t *testing.T, relay *aeprelaytest.Relay, convs []*oh.Conversation) {
	t.Helper()
	awaitNoneMissing(t, "vendor events never reached the relay", func() int {
		missing := 0
		byVendor := vendorIDs(relay.Events())
		for _, c := range convs {
			for _, ve := range c.Events() {
				if ve.Kind() != oh.KindTokenEvent && !byVendor[ve.ID()] {
					missing++
				}
			}
		}
		return missing
	})
}

// awaitNoneMissing waits, up to deliveredWithin, until missing counts
// nothing; what names what it counts, for the failure.
func awaitNoneMissing(t *testing.T, what string, missing func() int) {
	t.Helper()
	deadline := time.Now().Add(deliveredWithin)
	for {
		n := missing()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s within %s", n, what, deliveredWithin)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func produced(convs []*oh.Conversation) int {
	n := 0
	for _, c := range convs {
		n += len(c.Events())
	}
	return n
}

func vendorIDs(recs []aeprelaytest.Record) map[string]bool {
	out := map[string]bool{}
	for _, r := range recs {
		if vid, _ := r.Event.Data["vendor_event_id"].(string); vid != "" {
			out[vid] = true
		}
	}
	return out
}

// settle waits until the relay has received nothing new for a while: any
// redelivery still queued has arrived.
func settle(relay *aeprelaytest.Relay) {
	last, since := relay.Received(), time.Now()
	for time.Since(since) < time.Second {
		time.Sleep(50 * time.Millisecond)
		if n := relay.Received(); n != last {
			last, since = n, time.Now()
		}
	}
}

// verify asserts the list at the relay and logs the counts.
func verify(t *testing.T, relay *aeprelaytest.Relay, convs []*oh.Conversation, runs int, backfills bool) {
	t.Helper()
	backfilled := 0
	for _, v := range relay.Violations() {
		if backfills && v.Kind == aeprelaytest.ViolationStream && errors.Is(v.Err, stream.ErrOrdering) {
			backfilled++ // a unique position arriving late: checked below
			continue
		}
		t.Errorf("relay: %s", v)
	}
	events := relay.Events() // one per (source, id), in arrival order
	type position struct {
		source     string
		epoch, seq int64
	}
	positions := map[position]string{}
	sources := map[string]map[string]bool{} // session → sources
	outputs := map[string]map[string]int{}  // vendor id → type → events
	terminals := map[string]int{}           // run → terminals
	started := map[string]bool{}            // runs started
	for _, r := range events {
		ev := r.Event
		if ev.Seq != nil {
			p := position{ev.Source, ev.EffectiveEpoch(), *ev.Seq}
			if id, ok := positions[p]; ok && id != ev.ID {
				t.Errorf("position %v names two events: %s and %s", p, id, ev.ID)
			}
			positions[p] = ev.ID
		}
		if sources[ev.Session] == nil {
			sources[ev.Session] = map[string]bool{}
		}
		sources[ev.Session][ev.Source] = true
		if vid, _ := ev.Data["vendor_event_id"].(string); vid != "" {
			if outputs[vid] == nil {
				outputs[vid] = map[string]int{}
			}
			outputs[vid][ev.Type]++
		}
		switch ev.Type {
		case "run.started":
			started[ev.Run] = true
		case "run.finished", "run.failed", "run.cancelled":
			terminals[ev.Run]++
		}
	}

	vendorEvents := 0
	for _, c := range convs {
		if n := len(sources[c.ID()]); n != 1 {
			t.Errorf("conversation %s reached the relay from %d sources, want one session across every restart", c.ID(), n)
		}
		for source := range sources[c.ID()] {
			assertGapFree(t, eventsOf(relay.SessionEvents(source, c.ID())))
		}
		for _, ve := range c.Events() {
			if ve.Kind() == oh.KindTokenEvent {
				continue
			}
			vendorEvents++
			if len(outputs[ve.ID()]) == 0 {
				t.Errorf("vendor event %s (%s) of %s never arrived", ve.ID(), ve.Kind(), c.ID())
			}
			for typ, n := range outputs[ve.ID()] {
				if n != 1 {
					t.Errorf("vendor event %s arrived as %d different %s events", ve.ID(), n, typ)
				}
			}
		}
	}
	if len(started) != runs*len(convs) {
		t.Errorf("%d runs started, want %d", len(started), runs*len(convs))
	}
	for run := range started {
		if terminals[run] != 1 {
			t.Errorf("run %s has %d terminals, want exactly 1", run, terminals[run])
		}
	}
	redelivered := relay.Received() - len(events)
	t.Logf("counts: %d conversations, %d vendor events, %d AEP events at the relay (one per (source, id)), "+
		"%d received in all (%d redeliveries, %d backfills), %d runs, %d terminals, %d violations",
		len(convs), vendorEvents, len(events), relay.Received(), redelivered, backfilled, len(started), sumValues(terminals),
		len(relay.Violations())-backfilled)
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// assertGapFree checks a session's events in (epoch, seq) order (the
// relay's replay buffer keeps that order): one epoch across every restart,
// seq from 0 with no hole (the receiver never skips a position) and no
// repeat.
func assertGapFree(t *testing.T, buffer []*aep.Event) {
	t.Helper()
	if len(buffer) == 0 {
		t.Error("an empty session buffer")
		return
	}
	epoch := buffer[0].EffectiveEpoch()
	for i, ev := range buffer {
		if ev.EffectiveEpoch() != epoch || ev.Seq == nil || *ev.Seq != int64(i) {
			t.Errorf("session %s: buffer position %d holds %s at epoch %d seq %v, want epoch %d seq %d",
				ev.Session, i, ev.Type, ev.EffectiveEpoch(), seqText(ev.Seq), epoch, i)
			return
		}
	}
}

func eventsOf(recs []aeprelaytest.Record) []*aep.Event {
	out := make([]*aep.Event, len(recs))
	for i, r := range recs {
		out[i] = r.Event
	}
	return out
}

func seqText(seq *int64) string {
	if seq == nil {
		return "none"
	}
	return fmt.Sprint(*seq)
}
