//go:build live

package livetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
)

// loopPolicy pauses a conversation whose agent requests the same terminal
// command three times.
const loopPolicy = `    default:
      loop:
        repeated_tool: 3
        window: 10m
      action: pause
    control: openhandscontrol`

// TestLivePolicy: the scripted model repeats one terminal command; the
// aeppolicy processor records the loop once and pauses the real
// conversation through the open gate, with one write, acked in the
// session with the guardrail event as cause; an operator's resume through
// the relay lets it finish, and the loop, still on, is not paused twice.
func TestLivePolicy(t *testing.T) {
	python, bin, llm := liveTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g := &gated{t: t, server: startAgentServer(t, python), llm: llm}
	var front *Front
	g.rec, front = startRecordedFront(t, g.server.url)
	g.relay = aeprelaytest.Start(t, aeprelaytest.Config{Token: relayToken})
	g.col = startCollectorProcess(t, bin, gatedConfig(front.ProxyURL(), g.relay.URL(), loopPolicy))
	logOnFailure(t, g.server, g.col)

	id := g.open(ctx, conversationSpec{script: "loop"})
	guardrail := g.awaitEvent(ctx, id, "assessment.guardrail.recorded", "")
	assert.Equal(t, "loop.tool", guardrail.Data["guardrail"].(map[string]any)["categories"].([]any)[0].(map[string]any)["name"])
	g.accepted(ctx, id, guardrail.ID)
	g.awaitEvent(ctx, id, "state.delta", guardrail.ID)
	g.awaitStatus(ctx, id, "paused")

	resume := g.command(ctx, id, "control.resume", "", nil)
	g.accepted(ctx, id, resume)
	// The agent goes on: the script finishes, unless the agent server's
	// own stuck detector stops the repetition first (its stuck status,
	// which the processor records too).
	var status string
	require.NoError(t, poll(ctx, "the run ended", func() (bool, error) {
		var err error
		status, err = g.server.status(ctx, id)
		return status == "finished" || status == "stuck", err
	}))
	t.Logf("after the resume the conversation ended %s", status)

	pauses := 0
	for _, w := range g.writes() {
		if w.Method == "POST" && strings.HasSuffix(w.Path, "/pause") {
			pauses++
		}
	}
	assert.Equal(t, 1, pauses, "one pause per breach")
	loops := 0
	for _, ev := range g.events(id) {
		if ev.Type == "assessment.guardrail.recorded" && ev.Data["guardrail"].(map[string]any)["categories"].([]any)[0].(map[string]any)["name"] == "loop.tool" {
			loops++
		}
	}
	assert.Equal(t, 1, loops, "the loop is recorded once")
	for _, v := range g.relay.Violations() {
		t.Errorf("relay violation: %s", v)
	}
	assertOnlyControlWrites(t, g.rec.Transcript())
}
