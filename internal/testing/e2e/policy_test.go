package e2e

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
)

// policyConfig: a loop is three equal calls, a session may cost a
// quarter dollar, a run quiet for 3s is stuck unless a terminal call is
// open.
const policyConfig = `    default:
      session:
        cost_usd: {hard: 0.25}
      loop:
        repeated_tool: 3
        window: 10m
      stuck:
        after: 3s
        long_running_tools: [terminal]
    check_interval: 50ms`

// TestPolicies runs the aeppolicy processor between the stub and the
// relay over four conversations: one that loops (the same terminal call
// three times), one whose run costs more than its budget, one whose
// terminal call stays open past the stuck limit (a build: not flagged),
// and one whose run goes quiet with nothing open, which is flagged. It
// opens after the long call, so by the time it is flagged the long call
// has been quiet for longer. Each breach reaches the relay once, in the
// processor's own stream of its session, cause-linked to the event that
// crossed it; the relay's stream checker finds no broken rule; the
// breach counter says the same.
func TestPolicies(t *testing.T) {
	e := newEnv(t)
	metrics, err := childproc.FreeAddr()
	require.NoError(t, err)
	e.start(pipelineConfig{policy: policyConfig, metrics: metrics})
	looping, costly, building, quiet := e.newConversation(), e.newConversation(), e.newConversation(), e.newConversation()
	for _, c := range []*oh.Conversation{looping, costly, building, quiet} {
		e.awaitLive(c, 1)
	}

	// The build opens first: it stays quiet longest.
	appendEvent(t, building, nil)
	setStatus(t, building, oh.StatusRunning)
	appendEvent(t, building, oh.TerminalAction("make test"))

	setStatus(t, looping, oh.StatusRunning)
	for range 3 {
		action := appendEvent(t, looping, oh.TerminalAction("ls"))
		appendEvent(t, looping, oh.ObservationEvent(action, "README.md", false))
	}
	require.NoError(t, looping.FinishRun(oh.StatusFinished))

	setStatus(t, costly, oh.StatusRunning)
	_, err = costly.SetState("stats", statsValue(12000, 800, 0.4))
	require.NoError(t, err)
	require.NoError(t, costly.FinishRun(oh.StatusFinished))

	setStatus(t, quiet, oh.StatusRunning)

	loop := e.awaitGuardrail(looping, "loop.tool")
	cost := e.awaitGuardrail(costly, "budget.session.cost")
	stuck := e.awaitGuardrail(quiet, "stuck.idle")

	owned := func(c *oh.Conversation) map[string]*aep.Event {
		byID := map[string]*aep.Event{}
		for _, ev := range e.relayEvents(c.ID()) {
			byID[ev.ID] = ev
		}
		return byID
	}
	cause := owned(looping)[loop.Cause]
	if assert.NotNil(t, cause, "the loop's cause is an event of its session") {
		assert.Equal(t, "tool.requested", cause.Type)
		assert.Equal(t, 2, countType(beforeOwn(e.relayEvents(looping.ID()), cause), "tool.requested"), "the third request crossed it")
	}
	if cause := owned(costly)[cost.Cause]; assert.NotNil(t, cause) {
		assert.Equal(t, "run.finished", cause.Type)
	}
	assert.Equal(t, aep.SeverityError, cost.Severity)
	quietOwn := e.relayEvents(quiet.ID())
	lastOwn := quietOwn[len(quietOwn)-1]
	for _, ev := range quietOwn {
		if ev.Source != stuck.Source {
			lastOwn = ev
		}
	}
	assert.Equal(t, lastOwn.ID, stuck.Cause, "the last event before the silence")

	// The long build was quiet longer than the quiet run, and is not stuck.
	appendEvent(t, building, oh.MessageEvent("agent", "tests pass"))
	require.NoError(t, building.FinishRun(oh.StatusFinished))
	awaitEvents(t, "relay", func() []*aep.Event { return e.relayEvents(building.ID()) }, func(evs []*aep.Event) bool {
		return countType(evs, "run.finished") == 1
	})
	e.settle()

	var checker stream.Checker
	guardrails := map[string][]string{}
	for _, rec := range e.relay.Events() {
		require.NoError(t, checker.Add(rec.Event))
		if rec.Event.Type == "assessment.guardrail.recorded" {
			guardrails[rec.Event.Session] = append(guardrails[rec.Event.Session], policyOf(rec.Event))
		}
	}
	for _, v := range e.relay.Violations() {
		t.Errorf("relay: %s", v)
	}
	assert.Equal(t, []string{"loop.tool"}, guardrails[looping.ID()])
	assert.Equal(t, []string{"budget.session.cost"}, guardrails[costly.ID()])
	assert.Empty(t, guardrails[building.ID()], "an open long-running call is no stuck run")
	assert.Equal(t, []string{"stuck.idle"}, guardrails[quiet.ID()])

	assert.Equal(t, map[string]float64{
		`agent="openhands",level="hard",policy="loop.tool"`:           1,
		`agent="openhands",level="hard",policy="budget.session.cost"`: 1,
		`agent="openhands",level="soft",policy="stuck.idle"`:          1,
	}, scrapeCounter(t, metrics, "otelcol_aeppolicy_breaches"))
}

func appendEvent(t *testing.T, c *oh.Conversation, ev oh.Event) oh.Event {
	t.Helper()
	if ev == nil {
		ev = oh.MessageEvent("user", "run the tests")
	}
	out, err := c.Append(ev)
	require.NoError(t, err)
	return out
}

func setStatus(t *testing.T, c *oh.Conversation, status string) {
	t.Helper()
	_, err := c.SetStatus(status)
	require.NoError(t, err)
}

// awaitGuardrail waits for the session's guardrail event of policy.
func (e *env) awaitGuardrail(c *oh.Conversation, policy string) *aep.Event {
	e.t.Helper()
	evs := awaitEvents(e.t, "relay", func() []*aep.Event { return e.relayEvents(c.ID()) }, func(evs []*aep.Event) bool {
		return guardrailOf(evs, policy) != nil
	})
	g := guardrailOf(evs, policy)
	assert.Equal(e.t, "aep://aeppolicy/agent/openhands/session/"+c.ID(), g.Source, "the processor's own stream")
	return g
}

func guardrailOf(evs []*aep.Event, policy string) *aep.Event {
	for _, ev := range evs {
		if ev.Type == "assessment.guardrail.recorded" && policyOf(ev) == policy {
			return ev
		}
	}
	return nil
}

// policyOf is the policy a guardrail event names: its first category.
func policyOf(ev *aep.Event) string {
	g, _ := ev.Data["guardrail"].(map[string]any)
	cats, _ := g["categories"].([]any)
	if len(cats) == 0 {
		return ""
	}
	first, _ := cats[0].(map[string]any)
	name, _ := first["name"].(string)
	return name
}

// beforeOwn lists the events of ev's own stream positioned before it.
func beforeOwn(evs []*aep.Event, ev *aep.Event) []*aep.Event {
	var out []*aep.Event
	for _, x := range evs {
		if x.Source == ev.Source && x.EffectiveEpoch() == ev.EffectiveEpoch() && seqOf(x) < seqOf(ev) {
			out = append(out, x)
		}
	}
	return out
}

// scrapeCounter reads a counter's series from the collector's internal
// metrics, by their labels other than the collector's own.
func scrapeCounter(t *testing.T, addr, name string) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]float64{}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		rest, ok := strings.CutPrefix(lines.Text(), name+"{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		var kept []string
		for _, l := range strings.Split(labels, ",") {
			if strings.HasPrefix(l, "agent=") || strings.HasPrefix(l, "level=") || strings.HasPrefix(l, "policy=") {
				kept = append(kept, l)
			}
		}
		v, err := strconv.ParseFloat(value, 64)
		require.NoError(t, err)
		out[strings.Join(kept, ",")] += v
	}
	require.NoError(t, lines.Err())
	return out
}

// pausingPolicy pauses a conversation on its third equal terminal call.
const pausingPolicy = `    default:
      loop:
        repeated_tool: 3
        window: 10m
      action: pause
    control: openhandscontrol`

// TestPolicyPause: with the gate open, the loop's hard breach pauses the
// conversation with one write, acked in the session with the guardrail
// event as cause, and the flip to paused cause-linked the same way; an
// operator's resume through the relay then runs it again. With the gate
// closed the breach is recorded and nothing is written.
func TestPolicyPause(t *testing.T) {
	for _, tc := range []struct {
		name, control string
		writes        bool
	}{{"gate open", gateOn, true}, {"gate closed", gateOff, false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.start(pipelineConfig{policy: pausingPolicy, control: tc.control, receiverExtra: contentCapture})
			conv := e.conversationIn(oh.StatusRunning)
			for range 3 {
				action := appendEvent(t, conv, oh.TerminalAction("ls"))
				appendEvent(t, conv, oh.ObservationEvent(action, "README.md", false))
			}
			loop := e.awaitGuardrail(conv, "loop.tool")
			if !tc.writes {
				e.settle()
				assertNoWrites(t, e.stub)
				assert.Equal(t, oh.StatusRunning, conv.Status())
				assert.Nil(t, ackOf(e.relayEvents(conv.ID()), loop.ID), "a closed gate does not even ack")
				return
			}
			pause := &cmd{id: loop.ID, session: conv.ID()}
			ack, _ := e.awaitAck(pause)
			assert.Equal(t, "control.accepted", ack.Type)
			e.awaitCaused(pause, "state.delta")
			require.Equal(t, oh.StatusPaused, conv.Status())
			writes := e.stub.Writes()
			require.Len(t, writes, 1, "one write")
			assert.True(t, strings.HasSuffix(writes[0].Path, "/pause"), writes[0].Path)

			resume := &cmd{typ: "control.resume", session: conv.ID()}
			e.send(resume)
			ack, _ = e.awaitAck(resume)
			assert.Equal(t, "control.accepted", ack.Type, "resuming is the operator's decision")
			e.awaitCaused(resume, "state.delta")
			assert.Len(t, e.stub.Writes(), 2)
			e.settle()
			for _, v := range e.relay.Violations() {
				t.Errorf("relay: %s", v)
			}
		})
	}
}
