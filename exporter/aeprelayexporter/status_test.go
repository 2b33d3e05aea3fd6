package aeprelayexporter

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
)

// TestRefusedCredentialsAreRetried: a relay that refuses the exporter's
// token for a while (a rotation, an auth proxy restarting) is an error
// status and a counted refusal, never a permanent failure: the exporter
// keeps trying, the queue holds the events, and every one arrives once the
// relay accepts the token again.
func TestRefusedCredentialsAreRetried(t *testing.T) {
	for _, transport := range []Transport{TransportWebSocket, TransportHTTP} {
		t.Run(string(transport), func(t *testing.T) {
			relay := startRelay(t, aeprelaytest.Config{})
			relay.SetToken("rotated")
			cfg := withQueue(withRetry(testConfig(relay.URL())))
			cfg.Transport, cfg.Token = transport, relayToken
			h := startExporter(t, cfg, nil)
			events := sessionEvents("s1", 6)
			refusals := func() int64 {
				return h.counter(t, "otelcol_aeprelay_auth_refused",
					attribute.String("transport", string(transport)), attribute.Int("status_code", 401))
			}

			require.NoError(t, h.consume(t, aeptest.LogsOf(t, events[:3]...)))
			eventually(t, "the relay to refuse the token twice", func() bool { return refusals() >= 2 })
			require.NoError(t, h.consume(t, aeptest.LogsOf(t, events[3:]...)))
			status, statusErr := h.host.lastStatus()
			assert.Equal(t, componentstatus.StatusRecoverableError, status)
			assert.ErrorContains(t, statusErr, "refused the credentials (HTTP 401)")

			relay.SetToken(relayToken)
			relay.Await(t, "every event", func(r *aeprelaytest.Relay) bool { return len(r.Events()) == len(events) })
			assert.Equal(t, ids(events), relayIDs(relay), "nothing dropped, in order")
			eventually(t, "status OK", func() bool {
				status, _ := h.host.lastStatus()
				return status == componentstatus.StatusOK
			})
			logged := h.logged("AEP relay refused this exporter's credentials; retrying with backoff, events wait until it accepts them")
			require.Len(t, logged, 1, "one error a minute, however many refusals")
			assert.Contains(t, logged[0].ContextMap()["relay"], relay.Addr(), "the log names the relay")
			for _, entry := range h.logs.All() {
				assert.NotContains(t, fmt.Sprint(entry.ContextMap()), relayToken, "log line %q leaks the token", entry.Message)
			}
			requireNoViolations(t, relay)
		})
	}
}

// TestRefusedCredentialsAreRetryable: 401 and 403 fail a push retryably
// on both bindings, so that exporterhelper keeps it queued.
func TestRefusedCredentialsAreRetryable(t *testing.T) {
	for _, transport := range []Transport{TransportWebSocket, TransportHTTP} {
		for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
			t.Run(fmt.Sprintf("%s/%d", transport, code), func(t *testing.T) {
				srv, _ := statusRelay(t, code, `{"error":"unauthorized"}`)
				cfg := testConfig(srv.URL)
				cfg.Transport = transport
				cfg.Timeout = 300 * time.Millisecond
				h := startExporter(t, cfg, nil)
				refused := func() int64 {
					return h.counter(t, "otelcol_aeprelay_auth_refused", attribute.Int("status_code", code))
				}
				if transport == TransportWebSocket {
					eventually(t, "a refused dial", func() bool { return refused() >= 1 })
				}

				err := h.consume(t, aeptest.LogsOf(t, newEvent("s1", 0)))
				require.Error(t, err)
				assert.False(t, consumererror.IsPermanent(err), "refused credentials must be retryable: %v", err)
				assert.Contains(t, err.Error(), fmt.Sprintf("refused the credentials (HTTP %d): check token or auth", code))
				assert.GreaterOrEqual(t, refused(), int64(1))
				status, _ := h.host.lastStatus()
				assert.Equal(t, componentstatus.StatusRecoverableError, status)
			})
		}
	}
}

// TestPersistentQueueKeepsRefusedEventsAcrossARestart: events queued on
// storage while the relay refuses the credentials survive a collector
// restart and arrive once it accepts them.
func TestPersistentQueueKeepsRefusedEventsAcrossARestart(t *testing.T) {
	relay := startRelay(t, aeprelaytest.Config{})
	relay.SetToken("rotated")
	storageID := component.MustNewID("file_storage")
	dir := t.TempDir()
	cfg := withQueue(withRetry(testConfig(relay.URL())))
	cfg.Token = relayToken
	cfg.Timeout = 500 * time.Millisecond
	cfg.QueueConfig.Get().StorageID = &storageID
	events := sessionEvents("s1", 6)

	ctx := context.Background()
	before := newHarness(t, cfg)
	before.host = newTestHost()
	storage := hosttest.FileStorage(t, dir)
	before.host.extensions[storageID] = storage
	require.NoError(t, before.exp.Start(ctx, before.host))
	require.NoError(t, before.consume(t, aeptest.LogsOf(t, events...)))
	eventually(t, "a refused dial", func() bool { return before.counter(t, "otelcol_aeprelay_auth_refused") >= 1 })
	require.NoError(t, before.exp.Shutdown(ctx))
	require.NoError(t, storage.Shutdown(ctx))
	assert.Empty(t, relay.Events())

	relay.SetToken(relayToken)
	host := newTestHost()
	host.extensions[storageID] = hosttest.FileStorage(t, dir)
	startExporter(t, cfg, host)
	relay.Await(t, "every event", func(r *aeprelaytest.Relay) bool { return len(r.Events()) == len(events) })
	assert.Equal(t, ids(events), relayIDs(relay))
}
