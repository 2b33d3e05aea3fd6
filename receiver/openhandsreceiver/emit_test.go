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

// TestBatchPositionsEachEvent: every event of a batch holds its own seq
// and the batch's epoch, and keeps them through later batches, a move of
// the epoch included (the batch's seqs share one array, the epoch's
// events one epoch value).
func TestBatchPositionsEachEvent(t *testing.T) {
	tel, err := newTelemetry(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	pos := position{Epoch: 3, NextSeq: 7}
	e := &sessionEmitter{pos: &pos, tel: tel, logger: zap.NewNop()}
	batch := func(ids ...string) []*aep.Event {
		var events []*aep.Event
		for _, id := range ids {
			ev := aeptest.RunStarted(testSessionID, 0, id, "run-1")
			ev.Seq, ev.Epoch = nil, nil
			events = append(events, ev)
		}
		require.Equal(t, len(ids), e.batch(events).LogRecordCount())
		return events
	}
	first := batch("ev-1", "ev-2")
	second := batch("ev-3")
	pos.Epoch, pos.NextSeq = 4, 0
	third := batch("ev-4", "ev-5")
	for _, c := range []struct {
		ev         *aep.Event
		epoch, seq int64
	}{
		{first[0], 3, 7}, {first[1], 3, 8}, {second[0], 3, 9}, {third[0], 4, 0}, {third[1], 4, 1},
	} {
		assert.Equal(t, c.epoch, *c.ev.Epoch, c.ev.ID)
		assert.Equal(t, c.seq, *c.ev.Seq, c.ev.ID)
	}
}
