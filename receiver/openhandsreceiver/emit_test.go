package openhandsreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
)

// TestBatchDropsWhatTheProjectionRefuses: an event the projection refuses
// in the middle of a batch leaves no record, partly written or not, and
// takes no seq; the events around it keep theirs, with no gap.
func TestBatchDropsWhatTheProjectionRefuses(t *testing.T) {
	tel, err := newTelemetry(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	pos := position{Epoch: 3, NextSeq: 7}
	e := &sessionEmitter{pos: &pos, tel: tel, logger: zap.NewNop()}
	events := []*aep.Event{
		aeptest.RunStarted(testSessionID, 0, "ev-1", "run-1"),
		aeptest.RunStarted(testSessionID, 0, "ev-2", "run-1"),
		aeptest.RunStarted(testSessionID, 0, "ev-3", "run-1"),
	}
	for _, ev := range events {
		ev.Seq, ev.Epoch = nil, nil
	}
	events[1].Severity = "loud" // not a severity level

	logs := e.batch(events)

	got := aeptest.EventsOf(t, logs)
	require.Len(t, got, 2)
	assert.Equal(t, "ev-1", got[0].ID)
	assert.Equal(t, int64(7), *got[0].Seq)
	assert.Equal(t, "ev-3", got[1].ID)
	assert.Equal(t, int64(8), *got[1].Seq)
	assert.Equal(t, int64(3), *got[1].Epoch)
	assert.Nil(t, events[1].Seq, "a refused event takes no seq")
	assert.Equal(t, int64(9), pos.NextSeq)
	assert.Equal(t, 1, logs.ResourceLogs().Len())
	assert.Equal(t, scopeName, logs.ResourceLogs().At(0).ScopeLogs().At(0).Scope().Name())
}
