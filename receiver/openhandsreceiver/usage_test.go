package openhandsreceiver

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// statsValue is the server's stats state field: one usage id's totals.
func statsValue(prompt, completion int) map[string]any {
	return map[string]any{"usage_to_metrics": map[string]any{"agent": map[string]any{
		"model_name": "openai/fake", "accumulated_cost": 0.0,
		"accumulated_token_usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion},
	}}}
}

// TestRunUsageWaitsForTheLastStats: as the 1.58.2 server does, the stats
// update of a run's last LLM response comes after the status that ends the
// run; run.finished waits for it and carries the run's whole usage. When
// it never comes, run.finished is emitted after usageWait, without usage.
func TestRunUsageWaitsForTheLastStats(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		h := startHarness(t, fastConfig(socket, stub))
		conv := createConversation(t, stub)
		h.waitLive(conv, 1)

		run := func(first, second int, late bool) {
			mustStatus(t, conv, oh.StatusRunning)
			a := mustAppend(t, conv, oh.TerminalAction("ls"))
			_, err := conv.SetState("stats", statsValue(first, 10))
			require.NoError(t, err)
			mustAppend(t, conv, oh.ObservationEvent(a, "README.md", false))
			mustAppend(t, conv, oh.FinishAction("done"))
			mustStatus(t, conv, oh.StatusFinished)
			if late {
				_, err = conv.SetState("stats", statsValue(second, 25))
				require.NoError(t, err)
			}
		}

		run(1000, 2500, true)
		// The update that completes the usage follows the run.finished it released.
		got := h.waitTypes(conv.ID(), "state.delta", "run.finished", "state.delta")
		finished := last(got, "run.finished")
		assert.Equal(t, json.Number("2500"), finished.Data["gen_ai.usage.input_tokens"])
		assert.Equal(t, json.Number("25"), finished.Data["gen_ai.usage.output_tokens"])

		start := time.Now()
		run(3000, 0, false)
		got = h.waitTypes(conv.ID(), "state.delta", "run.finished")
		assert.GreaterOrEqual(t, time.Since(start), usageWait, "waited for the stats that never came")
		assert.Equal(t, 2, count(got, "run.finished"))
		assert.NotContains(t, last(got, "run.finished").Data, "gen_ai.usage.input_tokens", "incomplete usage is not reported")
		h.validate()
	})
}

// TestRunUsageSurvivesRestart: a receiver on storage stops while a run is
// open; the run goes on and finishes unwatched; the next receiver puts the
// run's whole duration and usage on run.finished, from the run's start and
// stats baseline the first one stored.
func TestRunUsageSurvivesRestart(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		conv := createConversation(t, stub)
		_, err := conv.SetState("stats", statsValue(400, 4)) // before the run
		require.NoError(t, err)
		mem := newMemStorage(nil)
		h1 := startHarnessWith(t, storageConfig(socket, stub), mem.extensions())
		h1.waitLive(conv, 1)
		running, err := conv.SetStatus(oh.StatusRunning)
		require.NoError(t, err)
		_, err = conv.SetState("stats", statsValue(1000, 10))
		require.NoError(t, err)
		h1.waitTypes(conv.ID(), "run.started", "state.delta", "state.delta")
		require.NoError(t, h1.rcv.Shutdown(context.Background()))

		_, err = conv.SetState("stats", statsValue(2500, 25))
		require.NoError(t, err)
		finished, err := conv.SetStatus(oh.StatusFinished)
		require.NoError(t, err)
		h2 := startHarnessWith(t, storageConfig(socket, stub), mem.extensions())
		got := h2.waitTypes(conv.ID(), "state.delta", "run.finished")

		f := last(got, "run.finished")
		assert.Equal(t, json.Number("2100"), f.Data["gen_ai.usage.input_tokens"], "the baseline of 400 survived")
		assert.Equal(t, json.Number("21"), f.Data["gen_ai.usage.output_tokens"])
		start, ok := mapping.ParseVendorTime(running.Timestamp())
		require.True(t, ok)
		end, ok := mapping.ParseVendorTime(finished.Timestamp())
		require.True(t, ok)
		assert.Equal(t, json.Number(strconv.FormatInt(end.Sub(start).Milliseconds(), 10)), f.Data["duration_ms"])
		assert.Equal(t, last(h1.session(conv.ID()), "run.started").Traceparent, f.Traceparent)
	})
}
