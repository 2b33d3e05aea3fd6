package openhandsreceiver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/telemetrydecl/telemetrydecltest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

func TestREADMEListsEveryMetric(t *testing.T) {
	telemetrydecltest.RequireREADMEMatches(t, "otelcol_openhands_", newTelemetry)
}

// observed sums what an observable counter reports, and counts series.
type observed struct {
	embedded.Int64Observer
	series int
	total  int64
}

func (o *observed) Observe(v int64, _ ...metric.ObserveOption) {
	o.series++
	o.total += v
}

func TestEventCountsBoundTheirValues(t *testing.T) {
	c := eventCounts{key: "type"}
	for i := range maxCountedValues + 44 {
		c.add(fmt.Sprint("x.vendor.kind", i))
	}
	c.add("x.vendor.kind0")

	var o observed
	require.NoError(t, c.observe(context.Background(), &o))
	assert.Equal(t, int64(maxCountedValues+45), o.total, "every event is counted")
	assert.Equal(t, maxCountedValues+1, o.series, "values past the bound count under other")
	assert.Equal(t, int64(2), c.byValue["x.vendor.kind0"].n.Load())
	assert.Equal(t, int64(44), c.byValue["other"].n.Load())
}

// TestHandOffReportsReceiverMetrics: what the emitter hands to the
// pipeline is reported as the collector's standard receiver metrics, under
// the receiver's id and transport http: accepted when the pipeline took
// it, refused when it refused it for good.
func TestHandOffReportsReceiverMetrics(t *testing.T) {
	for _, tc := range []struct {
		name              string
		next              consumer.Logs
		accepted, refused int64
	}{
		{name: "accepted", next: consumertest.NewNop(), accepted: 2},
		{name: "refused", next: consumertest.NewErr(consumererror.NewPermanent(errors.New("no"))), refused: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
			set := receivertest.NewNopSettings(componentType)
			set.TelemetrySettings = tel.NewTelemetrySettings()
			r, err := newReceiver(createDefaultConfig().(*Config), set, tc.next)
			require.NoError(t, err)
			e := &sessionEmitter{next: tc.next, pos: &position{Epoch: 1}, tel: r.tel, logger: zaptest.NewLogger(t)}
			logs := plog.NewLogs()
			records := logs.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
			records.AppendEmpty()
			records.AppendEmpty()
			require.NoError(t, e.consume(context.Background(), logs))

			want := attribute.NewSet(attribute.String("receiver", set.ID.String()), attribute.String("transport", "http"))
			for name, value := range map[string]int64{
				"otelcol_receiver_accepted_log_records": tc.accepted,
				"otelcol_receiver_refused_log_records":  tc.refused,
			} {
				m, err := tel.GetMetric(name)
				require.NoError(t, err, name)
				points := m.Data.(metricdata.Sum[int64]).DataPoints
				require.Len(t, points, 1, name)
				assert.Equal(t, want, points[0].Attributes, name)
				assert.Equal(t, value, points[0].Value, name)
			}
		})
	}
}

// TestServerUpFollowsSearch: otelcol_openhands_server_up is 1 while the
// server's search answers and 0 while it fails.
func TestServerUpFollowsSearch(t *testing.T) {
	stub := startStub(t)
	cfg := fastConfig(socketSession, stub)
	cfg.Servers[0].Name = "lab"
	h := startHarness(t, cfg)
	up := func(want int64) func() bool {
		return func() bool {
			_, err := h.tel.GetMetric("otelcol_openhands_server_up")
			return err == nil && h.metric("otelcol_openhands_server_up", "server", "lab") == want
		}
	}
	require.Eventually(t, up(1), waitFor, tick, "search answers")
	stub.SetConversationSearchFault(oh.SearchServerError)
	require.Eventually(t, up(0), waitFor, tick, "search fails")
	stub.SetConversationSearchFault(oh.SearchOK)
	require.Eventually(t, up(1), waitFor, tick, "search answers again")
}
