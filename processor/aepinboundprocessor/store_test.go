package aepinboundprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
)

var fileStorageID = component.MustNewID("file_storage")

// TestStoredPositionsSurviveRestarts: with storage, a new processor (a
// restarted collector, a later second) continues each session in the
// epoch it had, at the next seq; without it, in a new epoch.
func TestStoredPositionsSurviveRestarts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		storage   bool
		sameEpoch bool
	}{
		{name: "storage", storage: true, sameEpoch: true},
		{name: "no storage", storage: false, sameEpoch: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := hosttest.Extensions{fileStorageID: hosttest.FileStorage(t, t.TempDir())}
			clock := t0
			var checker stream.Checker
			var events []*aep.Event
			for run := range 2 {
				sink := new(consumertest.LogsSink)
				p := newTestProcessor(t, sink, func(cfg *Config) {
					cfg.Mode = "primary"
					if tc.storage {
						cfg.Storage = &fileStorageID
					}
				})
				// A process clock: each run starts a second later.
				p.sessions = newSessionTable(p.cfg.MaxSessions, &epochClock{now: func() time.Time { return clock }})
				clock = clock.Add(time.Second)
				require.NoError(t, p.Start(context.Background(), host))
				for i, name := range []string{"codex.conversation_starts", "codex.api_request"} {
					e := newExport()
					addRecord(e.resource(codexResource()), t0.Add(time.Duration(run*10+i)*time.Second), codexAttrs("conv-a", name, map[string]any{"model": "m"}))
					require.NoError(t, p.ConsumeLogs(context.Background(), e.ld))
				}
				require.NoError(t, p.Shutdown(context.Background()))
				for _, ld := range sink.AllLogs() {
					events = append(events, aepEvents(t, ld)...)
				}
			}
			checkStream(t, &checker, events)
			require.Len(t, events, 4)
			assert.Equal(t, tc.sameEpoch, *events[3].Epoch == *events[0].Epoch)
			if tc.sameEpoch {
				assert.Equal(t, []int64{0, 1, 2, 3}, []int64{*events[0].Seq, *events[1].Seq, *events[2].Seq, *events[3].Seq})
				// The session had its start: the restarted one knows it.
				assert.Equal(t, "x.codex.otel.conversation_starts", events[2].Type)
			} else {
				assert.Equal(t, int64(0), *events[2].Seq)
				assert.Equal(t, "session.started", events[2].Type)
			}
		})
	}
}

func TestStorageMisconfigured(t *testing.T) {
	missing := component.MustNewID("nope")
	p := newTestProcessor(t, consumertest.NewNop(), func(cfg *Config) { cfg.Storage = &missing })
	assert.ErrorContains(t, p.Start(context.Background(), componenttest.NewNopHost()), `extension "nope" is not configured`)
}
