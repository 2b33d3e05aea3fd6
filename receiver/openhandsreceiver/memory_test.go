package openhandsreceiver

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// offlineConversation is one conversation of a receiver that has no
// server: events are fed to it directly, as its sockets would.
func offlineConversation(tb testing.TB, id string) *conversation {
	tb.Helper()
	return offlineConversationWith(tb, id, createDefaultConfig().(*Config))
}

// offlineConversationWith is offlineConversation under cfg.
func offlineConversationWith(tb testing.TB, id string, cfg *Config) *conversation {
	tb.Helper()
	return offlineConversationTo(tb, id, cfg, consumertest.NewNop())
}

// offlineConversationTo is offlineConversationWith emitting to next.
func offlineConversationTo(tb testing.TB, id string, cfg *Config, next consumer.Logs) *conversation {
	tb.Helper()
	r, err := newReceiver(cfg, receivertest.NewNopSettings(componentType), next)
	require.NoError(tb, err)
	base, err := url.Parse("http://127.0.0.1:8000")
	require.NoError(tb, err)
	w := r.newServerWatch(&serverClient{name: "offline", base: base, hostPort: "127.0.0.1:8000"}, 1)
	c, err := w.open(conversationInfo{ID: id}, nil)
	require.NoError(tb, err)
	return c
}

var historyStart = time.Date(2026, 8, 22, 14, 0, 0, 0, time.UTC)

// historyEvent is the i-th event of a long agent loop, stamped 100 ms
// apart: status updates, tool calls and their results, agent messages.
func historyEvent(conv, i int) []byte {
	id := eventID(conv, i)
	ts := historyStart.Add(time.Duration(i) * 100 * time.Millisecond).Format("2006-01-02T15:04:05.000000")
	head := `{"id":"` + id + `","timestamp":"` + ts + `",`
	switch i % 5 {
	case 0:
		return []byte(head + `"kind":"ConversationStateUpdateEvent","source":"environment","key":"execution_status","value":"running"}`)
	case 1:
		return []byte(head + `"kind":"ActionEvent","source":"agent","tool_name":"terminal","tool_call_id":"call_` + id +
			`","action":{"kind":"TerminalAction","command":"ls"},"llm_response_id":"resp_` + id + `"}`)
	case 2: // answers the call of event i-1
		return []byte(head + `"kind":"ObservationEvent","source":"environment","tool_name":"terminal","tool_call_id":"call_` + eventID(conv, i-1) +
			`","observation":{"kind":"TerminalObservation","content":[{"type":"text","text":"README.md"}],"is_error":false}}`)
	case 3:
		return []byte(head + `"kind":"MessageEvent","source":"agent","llm_message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}`)
	default:
		return []byte(head + `"kind":"ConversationStateUpdateEvent","source":"environment","key":"execution_status","value":"idle"}`)
	}
}

func eventID(conv, i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", conv, i) }

// feedHistory plays n events of conversation conv through the legacy path
// (REST history) or the session socket's durable frames.
func feedHistory(c *conversation, conv, n int, session bool) {
	ctx := context.Background()
	for i := range n {
		if session {
			c.handleSessionFrame(ctx, []byte(`{"type":"durable","seq":`+strconv.Itoa(i)+`,"event":`+string(historyEvent(conv, i))+`}`))
		} else {
			c.handleEvent(ctx, historyEvent(conv, i), legacyHistory, false)
		}
	}
	c.session.flush(ctx)
}

// TestOverlapBoundedByResumeMargin: after a long history the dedupe window
// holds only what a reconnect can overlap: on the legacy socket the ids
// within resumeMargin of the newest, on the session socket nothing.
func TestOverlapBoundedByResumeMargin(t *testing.T) {
	const n = 5_000
	legacy := offlineConversation(t, "legacy")
	feedHistory(legacy, 0, n, false)
	margin := int(resumeMargin / (100 * time.Millisecond))
	require.LessOrEqual(t, legacy.session.overlap.len(), margin+1)
	require.LessOrEqual(t, cap(legacy.session.overlap.entries), 4*(margin+1)+64, "the backing array does not keep the history")

	session := offlineConversation(t, "session")
	feedHistory(session, 0, n, true)
	require.Zero(t, session.session.overlap.len())
	seq, _ := session.session.resumeCursor()
	require.Equal(t, int64(n-1), seq)
}

// BenchmarkConversationHeap reports the heap one conversation keeps after
// a history of n events (issue 13: it must not grow with n).
func BenchmarkConversationHeap(b *testing.B) {
	for _, transport := range []string{socketEvents, socketSession} {
		for _, n := range []int{1_000, 10_000} {
			b.Run(fmt.Sprintf("%s/history=%d", transport, n), func(b *testing.B) {
				const conversations = 5
				var perConversation float64
				for b.Loop() {
					keep := make([]*conversation, conversations)
					before := heapInUse()
					for i := range keep {
						keep[i] = offlineConversation(b, fmt.Sprint(i))
						feedHistory(keep[i], i, n, transport == socketSession)
					}
					perConversation = float64(heapInUse()-before) / conversations
					runtime.KeepAlive(keep)
				}
				b.ReportMetric(perConversation, "heap-B/conversation")
			})
		}
	}
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestMappedAheadIsBounded: a history read in one go is emitted in
// batches of about maxBatchEvents, not held whole until its end.
func TestMappedAheadIsBounded(t *testing.T) {
	sink := new(consumertest.LogsSink)
	c := offlineConversationTo(t, "batches", createDefaultConfig().(*Config), sink)
	feedHistory(c, 0, 4*maxBatchEvents, false)
	require.Greater(t, len(sink.AllLogs()), 2)
	for _, logs := range sink.AllLogs() {
		// One vendor event maps to a few AEP events at most.
		require.LessOrEqual(t, logs.LogRecordCount(), maxBatchEvents+4)
	}
}
