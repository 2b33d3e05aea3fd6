// Command demo is what `make demo`, `make demo-control` and
// `make demo-fleet` run (-scenario control, see control.go; -scenario
// fleet, see fleet.go). On loopback it starts a simulated
// OpenHands agent server and an AEP relay, runs the built collector against
// them with testdata/demo-config.yaml, plays one scripted conversation (a
// tool call, an approval, a failing tool, a task delegated to a child
// conversation, a finish, a deletion) and prints every AEP event as it
// reaches the relay, then the run as a span waterfall, the child's run
// nested under the delegating call (from the aep connector, via an OTLP
// traces sink) with its token and cost
// totals (scraped from the prometheus exporter), and the path of the
// session's log on disk (the aepfile exporter), checked as a valid AEP
// stream. The collector's own log goes to a file the demo names, and is
// shown when something fails. It stops by itself and exits non-zero if the
// relay saw a protocol violation or the scenario stalled. With -hold it
// keeps the collector running after a scenario that succeeded, until
// SIGINT or SIGTERM, and -extra-config merges a further configuration over
// -config: internal/testing/cockpitcheck serves the collector's telemetry
// that way and scrapes it.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrysink"
)

const (
	sessionKey = "demo-session-key"
	relayToken = "demo-relay-token"
)

var (
	extraConfig = flag.String("extra-config", "", "a further collector configuration merged over -config (the cockpit test adds its telemetry endpoints)")
	hold        = flag.Bool("hold", false, "after the scenario succeeded, keep the collector running until SIGINT or SIGTERM (the cockpit test scrapes it then)")
	// released closes on SIGINT or SIGTERM; a held collector stops then.
	released <-chan struct{}
)

func main() {
	collector := flag.String("collector", "bin/otelcol-openhands", "the built collector binary")
	config := flag.String("config", "testdata/demo-config.yaml", "the collector configuration")
	timeout := flag.Duration("timeout", 90*time.Second, "give up after this long")
	scenario := flag.String("scenario", "watch", "watch (read-only), control (the gate open, an operator steering), fleet (Codex, VS Code and an AEP emitter beside OpenHands) or govern (a budget breach pausing a conversation)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	released = ctx.Done()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	play := run
	switch *scenario {
	case "watch":
	case "control":
		play = runControl
	case "fleet":
		play = runFleet
	case "govern":
		play = runGovern
	default:
		fmt.Fprintf(os.Stderr, "demo: unknown scenario %q (want watch, control, fleet or govern)\n", *scenario)
		os.Exit(2)
	}
	if err := play(ctx, *collector, *config); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, collectorBin, config string) (err error) {
	f, err := startFixtures(true)
	if err != nil {
		return err
	}
	defer f.Close()
	agents, relay, traces := f.agents, f.relay, f.traces
	prometheus, err := childproc.FreeAddr()
	if err != nil {
		return err
	}
	conv, err := agents.CreateConversation(oh.ConversationOptions{Title: "Fix the failing test"})
	if err != nil {
		return err
	}
	say("agent server %s, relay %s, conversation %s", agents.URL(), relay.URL(), conv.ID())

	sessionLogs, err := os.MkdirTemp("", "otelcol-openhands-demo-sessions-*")
	if err != nil {
		return fmt.Errorf("session log directory: %w", err)
	}
	col, err := startCollector(collectorBin, config, agents.URL(), relay.URL(), traces.URL(), prometheus,
		"DEMO_SESSION_LOGS="+sessionLogs)
	if err != nil {
		return err
	}
	defer col.finish(&err)
	say("collector log: %s", col.logPath)

	watch := &relayWatch{ctx: ctx, relay: relay, col: col}
	waitFor, seen := watch.waitFor, func(typ string) func() bool { return watch.seen(conv.ID(), typ) }
	if err := waitFor("the collector to attach", seen("state.snapshot")); err != nil {
		return err
	}
	say("scenario: " + scenarioStory)
	if err := playScenario(agents, conv, watch); err != nil {
		return err
	}
	if err := waitFor("run.finished", seen("run.finished")); err != nil {
		return err
	}
	say("scenario: the conversation is deleted")
	if err := conv.Delete(); err != nil {
		return err
	}
	if err := waitFor("session.ended", seen("session.ended")); err != nil {
		return err
	}
	var sessionLog sessionLogFile
	if err := waitFor("the session log to hold session.ended", func() bool {
		sessionLog = findSessionLog(sessionLogs, conv.ID())
		return sessionLog.ended
	}); err != nil {
		return err
	}
	if err := sessionLog.check(); err != nil {
		return err
	}
	if err := showRun(ctx, os.Stdout, traces, "http://"+prometheus+"/metrics", scenarioSpans); err != nil {
		return err
	}

	violations := relay.Violations()
	say("%d AEP events reached the relay; %d protocol or stream violations", len(relay.Events()), len(violations))
	for _, v := range violations {
		say("violation: %s", v)
	}
	if len(violations) > 0 {
		return errors.New("the relay saw violations")
	}
	say("session log (aepfile exporter), %d events: %s", len(sessionLog.lines), sessionLog.path)
	say("  follow a session as it happens: tail -n +1 -f FILE | jq -c '{seq, type, subject}'")
	return nil
}

// relayWatch prints the events reaching the relay while a scenario waits
// for one of them.
type relayWatch struct {
	ctx     context.Context
	relay   *aeprelaytest.Relay
	col     *collectorProcess
	printed int
}

func (w *relayWatch) printNew() {
	evs := w.relay.Events()
	for _, rec := range evs[w.printed:] {
		printEvent(rec.Event)
	}
	w.printed = len(evs)
}

// waitFor prints new events until cond holds, the collector exits or the
// demo times out.
func (w *relayWatch) waitFor(what string, cond func() bool) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		w.printNew()
		select {
		case <-w.ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, w.ctx.Err())
		case <-w.col.Exited():
			return fmt.Errorf("waiting for %s: the collector exited: %v", what, w.col.ExitErr())
		case <-t.C:
		}
	}
	w.printNew()
	return nil
}

// seen holds once the relay has an event of the type in the session.
func (w *relayWatch) seen(session, typ string) func() bool {
	return func() bool {
		for _, rec := range w.relay.Events() {
			if rec.Event.Session == session && rec.Event.Type == typ {
				return true
			}
		}
		return false
	}
}

// scenarioStory tells what playScenario plays.
const scenarioStory = "the user asks, the agent runs a tool, asks for approval, hits an error, " +
	"delegates a regression test to a child conversation, finishes"

// scenarioSpans are the spans playScenario makes: the run, its four tool
// calls and the wait for approval; under the delegating call, the child's
// run and its two tool calls.
const scenarioSpans = 6 + 3

// playScenario scripts what the agent server would show for one turn: the
// agent delegates a regression test to a child conversation, which runs
// while the parent waits for it.
func playScenario(agents *oh.Server, conv *oh.Conversation, watch *relayWatch) error {
	var act1, act2, act3, delegate, childWrite, childTest oh.Event
	var child *oh.Conversation
	var launch oh.ChildLaunch
	appendTo := func(conv **oh.Conversation, dst *oh.Event, ev func() oh.Event) func() error {
		return func() (err error) {
			out, err := (*conv).Append(ev())
			if dst != nil {
				*dst = out
			}
			return err
		}
	}
	appendEv := func(dst *oh.Event, ev oh.Event) func() error {
		return appendTo(&conv, dst, func() oh.Event { return ev })
	}
	status := func(s string) func() error {
		return func() error { _, err := conv.SetStatus(s); return err }
	}
	// stats is the server's accumulated LLM usage, updated after each call.
	stats := func(prompt, completion int, cost float64) func() error {
		return func() error {
			_, err := conv.SetState("stats", map[string]any{"usage_to_metrics": map[string]any{"agent": map[string]any{
				"model_name": "openai/demo", "accumulated_cost": cost,
				"accumulated_token_usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion},
			}}})
			return err
		}
	}
	// seen waits for an event of the type in the session id names.
	seen := func(id *string, typ string) func() error {
		return func() error { return watch.waitFor(typ, watch.seen(*id, typ)) }
	}
	parentID, childID := conv.ID(), ""
	const task = "Add a regression test for the off-by-one in app.py."
	steps := []func() error{
		func() error {
			_, err := conv.SendUserMessage("The unit tests fail; please fix them.", false)
			return err
		},
		status(oh.StatusRunning),
		stats(1830, 96, 0.00671),
		appendEv(&act1, oh.ActionEvent(oh.ActionSpec{Action: map[string]any{"kind": "TerminalAction", "command": "pytest -q"}, SecurityRisk: "LOW", Thought: "Run the tests first."})),
		func() error { return appendEv(nil, oh.ObservationEvent(act1, "1 failed, 41 passed", false))() },
		stats(3950, 214, 0.01422),
		appendEv(&act2, oh.ActionEvent(oh.ActionSpec{Action: map[string]any{"kind": "TerminalAction", "command": "pip install -r requirements.txt"}, SecurityRisk: "MEDIUM"})),
		status(oh.StatusWaitingForConfirmation), // the confirmation policy stops here
		status(oh.StatusRunning),                // a human approved it in the OpenHands UI
		func() error {
			return appendEv(nil, oh.ObservationEvent(act2, "ERROR: Could not find a version that satisfies the requirement", true))()
		},
		stats(6420, 388, 0.02315),
		appendEv(&act3, oh.ActionEvent(oh.ActionSpec{ToolName: "file_editor", Action: map[string]any{"kind": "FileEditorAction", "command": "str_replace", "path": "/workspace/app.py"}})),
		func() error { return appendEv(nil, oh.ObservationEvent(act3, "The file has been edited.", false))() },
		stats(9105, 541, 0.03262),
		// The agent delegates: the server launches the child, the tool
		// reports the launch.
		appendEv(&delegate, oh.StartChildAction(task, "Regression test")),
		func() (err error) {
			if launch, err = conv.StartChild(task, "Regression test"); err != nil {
				return err
			}
			childID = launch.ConversationID
			child, _ = agents.Conversation(childID)
			return nil
		},
		func() error { return appendEv(nil, oh.StartChildObservation(delegate, launch))() },
		// The child's work goes under the delegating call once the
		// collector has linked them: the parent's delegation and the
		// child's session (found by the next poll).
		seen(&parentID, "delegation.subagent.started"),
		seen(&childID, "session.started"),
		appendTo(&child, &childWrite, func() oh.Event {
			return oh.ActionEvent(oh.ActionSpec{ToolName: "file_editor", Action: map[string]any{"kind": "FileEditorAction", "command": "create", "path": "/workspace/tests/test_regression.py"}})
		}),
		appendTo(&child, nil, func() oh.Event { return oh.ObservationEvent(childWrite, "File created.", false) }),
		appendTo(&child, &childTest, func() oh.Event {
			return oh.ActionEvent(oh.ActionSpec{Action: map[string]any{"kind": "TerminalAction", "command": "pytest -q tests/test_regression.py"}})
		}),
		appendTo(&child, nil, func() oh.Event { return oh.ObservationEvent(childTest, "1 passed", false) }),
		appendTo(&child, nil, func() oh.Event { return oh.MessageEvent("agent", "Added tests/test_regression.py; it passes.") }),
		func() error { return child.FinishRun(oh.StatusFinished) },
		seen(&parentID, "delegation.subagent.stopped"),
		appendEv(nil, oh.MessageEvent("agent", "Fixed the off-by-one in app.py and added a regression test; all 43 tests pass.")),
		func() error { return conv.FinishRun(oh.StatusFinished) },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("scenario step %d: %w", i+1, err)
		}
		time.Sleep(150 * time.Millisecond) // a pace a person can follow
	}
	return nil
}

func printEvent(ev *aep.Event) {
	session := shortID(ev.Session)
	seq := "-"
	if ev.Seq != nil {
		seq = fmt.Sprint(*ev.Seq)
	}
	fmt.Printf("relay <- %-11s session=%-8s seq=%-3s %-34s %s\n", ev.Agent, session, seq, ev.Type, ev.Subject)
}

func say(format string, args ...any) {
	fmt.Printf("demo  | "+format+"\n", args...)
}

// collectorProcess is the built distribution running as a child process,
// its output in a log file so that it never interleaves with the event lines.
type collectorProcess struct {
	*childproc.Process
	logPath string
	// prometheus is the prometheus exporter's host:port, "" without one.
	prometheus string
}

// startCollector runs the collector with the fixtures' addresses, and
// extraEnv (NAME=value), in its environment.
func startCollector(bin, config, agentServer, relay, traces, prometheus string, extraEnv ...string) (*collectorProcess, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("collector binary %s: %w (run `make build` first)", bin, err)
	}
	log, err := os.CreateTemp("", "otelcol-openhands-demo-*.log")
	if err != nil {
		return nil, fmt.Errorf("collector log file: %w", err)
	}
	defer log.Close() // the child has its own descriptor
	args := []string{"--config", config}
	if *extraConfig != "" {
		args = append(args, "--config", *extraConfig)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"DEMO_AGENT_SERVER="+agentServer, "DEMO_SESSION_API_KEY="+sessionKey,
		"DEMO_RELAY="+relay, "DEMO_RELAY_TOKEN="+relayToken,
		"DEMO_TRACES="+traces, "DEMO_PROMETHEUS="+prometheus)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout, cmd.Stderr = log, log
	p, err := childproc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start collector: %w", err)
	}
	return &collectorProcess{Process: p, logPath: log.Name(), prometheus: prometheus}, nil
}

// showLog prints the collector's log, trimmed, after a failure.
func (p *collectorProcess) showLog() {
	f, err := os.Open(p.logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo  | cannot read the collector log:", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(os.Stderr, "demo  | the collector's log (%s):\n", p.logPath)
	prefixLines(os.Stderr, f)
}

// logNoise is what every collector log line repeats: the service resource
// and the component identity.
var logNoise = regexp.MustCompile(`"resource": \{[^}]*\}(, )?|"otelcol\.[a-z.]+": "[^"]*"(, )?|, \{\}$`)

// prefixLines copies the collector's log, trimmed to what a reader needs:
// level, message and the fields that differ from line to line.
func prefixLines(w io.Writer, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		// time, level, [caller,] message[, fields]: keep level and on.
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) > 1 {
			fields = slices.DeleteFunc(fields[1:], func(f string) bool { return strings.Contains(f, ".go:") })
		}
		line := logNoise.ReplaceAllString(strings.Join(fields, " "), "")
		fmt.Fprintln(w, "collector | "+strings.TrimSuffix(line, " {}"))
	}
}

// finish stops the collector, printing its log first when the scenario
// failed (*err set): deferred by every scenario.
func (p *collectorProcess) finish(err *error) {
	if *err != nil {
		p.showLog()
	}
	if *err == nil && *hold {
		say("holding the collector (prometheus exporter at %q) until SIGINT or SIGTERM", p.prometheus)
		<-released
	}
	p.Stop(15 * time.Second)
}

// fixtures are what every scenario plays between: the simulated agent
// server, the local relay and, when asked for, the OTLP traces sink.
type fixtures struct {
	agents *oh.Server
	relay  *aeprelaytest.Relay
	traces *telemetrysink.Traces
}

func startFixtures(withTraces bool) (*fixtures, error) {
	agents, err := oh.NewServer(oh.Config{SessionAPIKeys: []string{sessionKey}})
	if err != nil {
		return nil, err
	}
	f := &fixtures{agents: agents}
	if f.relay, err = aeprelaytest.New(aeprelaytest.Config{Token: relayToken}); err != nil {
		f.Close()
		return nil, err
	}
	if withTraces {
		if f.traces, err = telemetrysink.StartTraces(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

func (f *fixtures) Close() {
	if f.traces != nil {
		f.traces.Close()
	}
	if f.relay != nil {
		f.relay.Close()
	}
	f.agents.Close()
}
