package openhandsreceiver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// BenchmarkSessionFrame is the per-frame work around the mapping at a low
// rate: every op is one frame carrying one tool action or observation,
// emitted alone (one ConsumeLogs per frame), with the receiver's metrics
// recorded by an SDK meter as in the collector. "event" feeds events
// already decoded, so that it measures the session's own work (dedupe,
// mapping, decoration, projection, telemetry, hand-off); "frame" feeds the
// raw /sockets/session frames through receive, decoding included.
func BenchmarkSessionFrame(b *testing.B) {
	b.Run("event", func(b *testing.B) {
		c := benchConversation(b, consumertest.NewNop())
		events := make([]mapping.Event, b.N)
		for i := range events {
			ev, err := mapping.DecodeEvent(toolEvent(i))
			require.NoError(b, err)
			events[i] = ev
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i, ev := range events {
			c.session.handleDurable(ctx, int64(i), 1, ev, nil)
			c.session.frameDone(ctx, false)
		}
		b.StopTimer()
		requireEmittedEach(b, c)
	})
	b.Run("frame", func(b *testing.B) {
		c := benchConversation(b, consumertest.NewNop())
		frames := make([][]byte, b.N)
		for i := range frames {
			frames[i] = []byte(`{"type":"durable","seq":` + strconv.Itoa(i) + `,"event":` + string(toolEvent(i)) + `}`)
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for _, raw := range frames {
			c.receive(ctx, c.handleSessionFrame, raw, false)
		}
		b.StopTimer()
		requireEmittedEach(b, c)
	})
}

// requireEmittedEach fails unless every frame fed to c left at least one
// positioned event.
func requireEmittedEach(b *testing.B, c *conversation) {
	b.Helper()
	c.session.mu.Lock()
	defer c.session.mu.Unlock()
	require.GreaterOrEqual(b, c.session.durable.NextSeq, int64(b.N))
}

// toolEvent is the i-th event of a loop of terminal calls: an action on
// even i, its observation on odd i (historyEvent's events 1 and 2).
func toolEvent(i int) []byte {
	return historyEvent(0, 5*(i/2)+1+i%2)
}

// benchConversation is an offline conversation emitting to next, its
// receiver's metrics recorded by an SDK meter and its spans by none, as in
// a collector whose service::telemetry configures no trace processor.
func benchConversation(b *testing.B, next consumer.Logs) *conversation {
	b.Helper()
	tel := componenttest.NewTelemetry()
	b.Cleanup(func() { require.NoError(b, tel.Shutdown(context.Background())) })
	set := receivertest.NewNopSettings(componentType)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.TracerProvider = componenttest.NewNopTelemetrySettings().TracerProvider
	r, err := newReceiver(createDefaultConfig().(*Config), set, next)
	require.NoError(b, err)
	base, err := url.Parse("http://127.0.0.1:8000")
	require.NoError(b, err)
	w := r.newServerWatch(&serverClient{name: "bench", base: base, hostPort: "127.0.0.1:8000"}, 1)
	c, err := w.open(conversationInfo{ID: "5f0e1d2c-3b4a-4958-8a7b-6c5d4e3f2a10"}, nil)
	require.NoError(b, err)
	return c
}

// BenchmarkFrameRead is the socket read loop's work per frame: one
// /sockets/session frame of a tool event read through the frameConn and
// the frameReader, as readSession reads it, over loopback.
func BenchmarkFrameRead(b *testing.B) {
	frames := make([][]byte, b.N)
	for i := range frames {
		frames[i] = wsFrame(true, websocket.TextMessage, []byte(`{"type":"durable","seq":`+strconv.Itoa(i)+`,"event":`+string(toolEvent(i))+`}`), false)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		for _, f := range frames {
			if _, err := conn.NetConn().Write(f); err != nil {
				return
			}
		}
		_, _, _ = conn.ReadMessage() // until the client goes
	}))
	defer srv.Close()
	u, err := url.Parse("ws" + strings.TrimPrefix(srv.URL, "http"))
	require.NoError(b, err)
	dialer, fc := frameDialer(&websocket.Dialer{HandshakeTimeout: 5 * time.Second}, u)
	conn, resp, err := dialer.DialContext(context.Background(), u.String(), nil)
	require.NoError(b, err)
	resp.Body.Close()
	defer conn.Close()
	(*fc).startFrames(nil)
	reader := newFrameReader(conn, 1<<20, defaultSocketSettings)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for range frames {
		data, err := reader.read(buf)
		if err != nil {
			b.Fatal(err)
		}
		buf = data
		(*fc).wholeFrameWaiting()
	}
}
