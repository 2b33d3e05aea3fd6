package openhandsreceiver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// poisonText is the content of a stored event too large for a 64 KiB frame
// cap. Its marker must never leave the receiver when the event degrades.
var poisonText = "POISON-CONTENT " + strings.Repeat("x", 200<<10)

const smallFrameCap = 64 << 10

// TestPoisonEventOnSessionSocket: a stored event larger than the server's
// frame cap (it closes 1013 frame_too_large on every replay) or than
// max_frame_bytes must not stall the conversation: the event is read over
// REST and mapped, or degraded to a visible x.openhands.event.oversize, and
// everything after it is delivered.
func TestPoisonEventOnSessionSocket(t *testing.T) {
	for _, tc := range []struct {
		name string
		// serverCap is the stub's frame cap, receiverCap max_frame_bytes.
		serverCap, receiverCap int
		// first: the poison is the log's first event (no seq to page from).
		first    bool
		degraded bool
	}{
		{name: "server frame cap, read over REST", serverCap: smallFrameCap, receiverCap: defaultMaxFrameBytes},
		{name: "max_frame_bytes, degraded", serverCap: 4 << 20, receiverCap: smallFrameCap, degraded: true},
		{name: "first event, server frame cap", serverCap: smallFrameCap, receiverCap: defaultMaxFrameBytes, first: true},
		{name: "first event, max_frame_bytes", serverCap: 4 << 20, receiverCap: smallFrameCap, first: true, degraded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := oh.Start(t, oh.Config{SessionAPIKeys: []string{testKey}, MaxFrameBytes: tc.serverCap})
			conv := createConversation(t, stub)
			if !tc.first {
				mustStatus(t, conv, oh.StatusRunning)
			}
			poison := mustAppend(t, conv, oh.MessageEvent("agent", poisonText))
			after := mustAppend(t, conv, oh.MessageEvent("agent", "after the poison"))
			if tc.first {
				mustStatus(t, conv, oh.StatusRunning)
			}

			cfg := fastConfig(socketSession, stub)
			cfg.MaxFrameBytes = int64(tc.receiverCap)
			h := startHarness(t, cfg)
			h.waitLive(conv, 1)
			mustStatus(t, conv, oh.StatusFinished)
			got := h.waitTypes(conv.ID(), "state.delta", "run.finished")

			byVendorID := map[string]*aep.Event{}
			for _, ev := range got {
				if id, _ := ev.Data["vendor_event_id"].(string); id != "" {
					byVendorID[id] = ev
				}
			}
			require.Contains(t, byVendorID, after.ID(), "the event after the poison is delivered")
			require.Contains(t, byVendorID, poison.ID())
			stand := byVendorID[poison.ID()]
			if tc.degraded {
				assert.Equal(t, "x.openhands.event.oversize", stand.Type)
				assert.Equal(t, aep.SeverityWarning, stand.Severity)
				assert.Equal(t, "MessageEvent", stand.Data["vendor_kind"])
				size, err := stand.Data["size_bytes"].(json.Number).Int64()
				require.NoError(t, err)
				assert.GreaterOrEqual(t, size, int64(len(poisonText)))
				assert.Equal(t, json.Number("65536"), stand.Data["limit_bytes"])
				assert.Equal(t, int64(1), h.metric("otelcol_openhands_rest_catchup_events", "outcome", "degraded"))
			} else {
				assert.Equal(t, "x.openhands.message.event", stand.Type)
				assert.Positive(t, h.metric("otelcol_openhands_rest_catchup_events", "outcome", "mapped"))
			}
			for _, ev := range h.events() {
				raw, err := ev.MarshalJSON()
				require.NoError(t, err)
				assert.NotContains(t, string(raw), "POISON-CONTENT", "content never rides at metadata")
			}
			assert.LessOrEqual(t, h.metric("otelcol_openhands_reconnects", "", ""), int64(3), "one reconnect gets past it")
			h.validate()
			h.assertEveryVendorEventOnce(conv)
			assertReadOnly(t, stub)
		})
	}
}

// TestPoisonEventLive: the poison arrives on a live socket; the receiver
// reconnects once past it and keeps the conversation flowing.
func TestPoisonEventLive(t *testing.T) {
	stub := oh.Start(t, oh.Config{SessionAPIKeys: []string{testKey}, MaxFrameBytes: smallFrameCap})
	conv, h := watchRunning(t, stub, socketSession)
	mustAppend(t, conv, oh.MessageEvent("agent", poisonText))
	h.waitLive(conv, 2)
	mustStatus(t, conv, oh.StatusFinished)
	h.waitTypes(conv.ID(), "x.openhands.message.event", "state.delta", "run.finished")
	h.validate()
	h.assertEveryVendorEventOnce(conv)
}

// TestServerClosingAfterSyncBacksOff: a full_state snapshot over the
// server's frame cap closes every connection right after sync (and the
// replay). There is nothing to skip, so the retries must back off
// exponentially rather than restart from initial_interval.
func TestServerClosingAfterSyncBacksOff(t *testing.T) {
	stub := oh.Start(t, oh.Config{SessionAPIKeys: []string{testKey}, MaxFrameBytes: smallFrameCap})
	conv := createConversation(t, stub)
	// A state key this large makes both its update event and every
	// connect-time snapshot too large for the socket.
	_, err := conv.SetState("notes", poisonText)
	require.NoError(t, err)
	cfg := fastConfig(socketSession, stub)
	cfg.Reconnect = backoff.Config{InitialInterval: 40 * time.Millisecond, MaxInterval: 5 * time.Second}
	h := startHarness(t, cfg)
	h.waitTypes(conv.ID(), "session.started", "state.delta")

	var auths []time.Time
	require.Eventually(t, func() bool {
		auths = auths[:0]
		for _, f := range stub.InboundFrames() {
			auths = append(auths, f.At)
		}
		return len(auths) >= 5
	}, waitFor, tick)
	// The first connection read the state update over REST (progress); none
	// after it progresses, so the waits before connections 2 to 5 are 40,
	// 80, 160 and 320 ms. A reset to the initial interval would make the
	// last one about 40. (A lower bound: load only adds.)
	assert.GreaterOrEqual(t, auths[4].Sub(auths[3]), 300*time.Millisecond)
	assert.Positive(t, h.metric("otelcol_openhands_rest_catchup_events", "outcome", "mapped"))

	// New stored events still get through: each connection replays them
	// before the snapshot that closes it.
	mustStatus(t, conv, oh.StatusRunning)
	h.waitTypes(conv.ID(), "run.started", "state.delta")
	h.validate()
}

// TestStoredEventFirstSentAsTransient: the session socket sends an event
// published before it was persisted as transient; the replay after a
// reconnect then carries it as durable. The seq cursor cannot tell, so the
// overlap window must: it is emitted once.
func TestStoredEventFirstSentAsTransient(t *testing.T) {
	stub := startStub(t)
	conv, h := watchRunning(t, stub, socketSession)

	early := oh.MessageEvent("agent", "published before persisted")
	early["id"] = oh.NewUUID()
	_, err := conv.Publish(early)
	require.NoError(t, err)
	h.waitTypes(conv.ID(), "x.openhands.message.event")
	conv.DropSockets()
	mustAppend(t, conv, early)
	h.waitLive(conv, 2)
	mustStatus(t, conv, oh.StatusFinished)
	h.waitTypes(conv.ID(), "state.delta", "run.finished")
	assert.Equal(t, int64(1), h.metric("otelcol_openhands_duplicates_dropped", "", ""))
	h.validate()
	h.assertEveryVendorEventOnce(conv)
}
