package mapping

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

func delta(tb testing.TB, n int, content string) Event {
	tb.Helper()
	return vendorEvent(tb, map[string]any{
		"kind": "StreamingDeltaEvent", "id": "d" + strconv.Itoa(n), "timestamp": vendorTS,
		"source": "agent", "content": content, "reasoning_content": reasoningMarker,
	})
}

func deltas(tb testing.TB, chunks []string) []Event {
	tb.Helper()
	evs := make([]Event, len(chunks))
	for i, c := range chunks {
		evs[i] = delta(tb, i, c)
	}
	return evs
}

func deltaContent(ev *aep.Event) string {
	p, _ := ev.Data["payload"].(map[string]any)
	s, _ := p["content"].(string)
	return s
}

func TestDeltasOffEmitNothing(t *testing.T) {
	c := newConversation(t, testConfig(aep.CaptureFull, false))
	assert.Empty(t, feed(t, c, deltas(t, []string{"a", "b"})...))
}

// TestDeltaSecretSplit: a secret split across deltas never appears whole in
// any emitted event; the stream's released text plus its final flush is the
// redacted whole, and the flush precedes the durable event's own mapping.
func TestDeltaSecretSplit(t *testing.T) {
	const said = "the password is hunter2, ok"
	for _, tc := range []struct {
		name    string
		chunks  []string
		flushed string // the held-back remainder released at the stream's end
	}{
		{"hunt_er2", []string{"the password is hunt", "er2, ok"}, ""},
		{"one_char_per_chunk", strings.Split(said, ""), ""},
		{"one_char_per_chunk_ending_in_the_secret", strings.Split("say hunter2", ""), ""},
		{"prefix_held_to_the_end", []string{"the password is hu", "nter"}, "hunter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConversation(t, testConfig(aep.CaptureRedacted, true))
			out := feed(t, c, deltas(t, tc.chunks)...)
			require.Len(t, out, len(tc.chunks), "one event per delta")
			end := feed(t, c, message(t, "m1", "agent", "assistant"))
			out = append(out, end...)
			requireValid(t, out)
			requireLifecycle(t, out)

			var streamed strings.Builder
			for i, ev := range out {
				assert.NotContains(t, marshal(t, ev), secret, "event %d", i)
				assert.NotContains(t, marshal(t, ev), reasoningMarker, "event %d", i)
				if ev.Type == deltaType {
					streamed.WriteString(deltaContent(ev))
				}
			}
			assert.Equal(t, strings.ReplaceAll(strings.Join(tc.chunks, ""), secret, secretMark), streamed.String())
			if tc.flushed == "" {
				assert.Equal(t, []string{"x.openhands.message.event"}, types(end))
				return
			}
			require.Equal(t, []string{deltaType, "x.openhands.message.event"}, types(end), "the flush comes first")
			assert.Equal(t, tc.flushed, deltaContent(end[0]))
			last := len(tc.chunks) - 1
			assert.Equal(t, "d"+strconv.Itoa(last), end[0].Data["vendor_event_id"], "the flush belongs to the last delta")
		})
	}
}

func TestDeltaStreamEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, c *Conversation) []*aep.Event
		want []string
	}{
		{"action", func(t *testing.T, c *Conversation) []*aep.Event {
			return c.Map(action(t, "a1", "c1"), received)
		}, []string{deltaType, "tool.requested"}},
		{"end", func(t *testing.T, c *Conversation) []*aep.Event {
			return c.End(received, vendorTS)
		}, []string{deltaType, "session.ended"}},
		{"deleting", func(t *testing.T, c *Conversation) []*aep.Event {
			return c.Map(stateEvent(t, "s1", StatusDeleting), received)
		}, []string{"state.delta", deltaType, "session.ended"}},
		// Environment events do not end the agent's stream.
		{"environment_event", func(t *testing.T, c *Conversation) []*aep.Event {
			return c.Map(observation(t, "o1", "c1"), received)
		}, []string{"tool.completed"}},
		{"token_event", func(t *testing.T, c *Conversation) []*aep.Event {
			return c.Map(vendorEvent(t, map[string]any{"kind": "TokenEvent", "id": "t1", "source": "agent"}), received)
		}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConversation(t, testConfig(aep.CaptureRedacted, true))
			out := feed(t, c, delta(t, 1, "say hun"))
			assert.Equal(t, "say ", deltaContent(out[0]))
			end := tc.end(t, c)
			assert.Equal(t, tc.want, types(end))
			if flush := findType(end, deltaType); flush != nil {
				assert.Equal(t, "hun", deltaContent(flush))
				assert.NotEqual(t, out[0].ID, flush.ID)
			}
		})
	}
}

func TestDeltaLevels(t *testing.T) {
	for _, tc := range []struct {
		level aep.Capture
		want  string
	}{
		{aep.CaptureMetadata, ""},
		{aep.CaptureRedacted, "say "},
		{aep.CaptureFull, "say hun"},
	} {
		t.Run(string(tc.level), func(t *testing.T) {
			c := newConversation(t, testConfig(tc.level, true))
			out := feed(t, c, delta(t, 1, "say hun"), message(t, "m1", "agent", "assistant"))
			assert.Equal(t, tc.want, deltaContent(out[0]))
			if tc.level == aep.CaptureMetadata {
				assert.Equal(t, map[string]any{"vendor_ts": vendorTS, "vendor_event_id": "d1"}, out[0].Data)
			}
		})
	}
}
