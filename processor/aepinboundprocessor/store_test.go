package aepinboundprocessor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/epoch"
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
				p.sessions = newSessionTable(p.cfg.MaxSessions, epoch.NewClock(func() time.Time { return clock }))
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

// flakyStorage is a storage client whose reads or writes fail while
// failing is set.
type flakyStorage struct {
	storage.Client
	failReads, failWrites, failing bool
}

func (s *flakyStorage) Get(ctx context.Context, key string) ([]byte, error) {
	if s.failing && s.failReads {
		return nil, errors.New("disk gone")
	}
	return s.Client.Get(ctx, key)
}

func (s *flakyStorage) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if s.failing && s.failWrites {
		return errors.New("disk full")
	}
	return s.Client.Batch(ctx, ops...)
}

// TestStorageFailureRefusesTheExport: a storage read or write that fails
// refuses the export, retryable, before anything leaves; the retry maps
// the records to the positions the failed attempt would have taken.
func TestStorageFailureRefusesTheExport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client *flakyStorage
	}{
		{"read", &flakyStorage{Client: storage.NewNopClient(), failReads: true}},
		{"write", &flakyStorage{Client: storage.NewNopClient(), failWrites: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := new(consumertest.LogsSink)
			p := newTestProcessor(t, sink, func(cfg *Config) { cfg.Mode = "primary" })
			p.store = &positionStore{client: tc.client}
			export := func() plog.Logs {
				e := newExport()
				addRecord(e.resource(codexResource()), t0, codexAttrs("conv-a", "codex.conversation_starts", map[string]any{"model": "m"}))
				return e.ld
			}
			tc.client.failing = true
			err := p.ConsumeLogs(context.Background(), export())
			require.Error(t, err)
			assert.False(t, consumererror.IsPermanent(err), "the sender retries")
			assert.Zero(t, sink.LogRecordCount(), "nothing left")

			tc.client.failing = false
			require.NoError(t, p.ConsumeLogs(context.Background(), export()))
			events := aepEvents(t, sink.AllLogs()[0])
			require.Len(t, events, 1)
			assert.Equal(t, "session.started", events[0].Type)
			assert.Equal(t, int64(0), *events[0].Seq)
		})
	}
}
