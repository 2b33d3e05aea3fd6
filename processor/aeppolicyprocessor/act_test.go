package aeppolicyprocessor

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/hosttest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/telemetrytest"
)

var controlID = component.MustNewID("openhandscontrol")

// fakeGate records what it is asked to originate.
type fakeGate struct {
	hosttest.Inert
	closed bool

	mu       sync.Mutex
	commands []*aep.Event
}

func (g *fakeGate) Originate(_ context.Context, cmd *aep.Event) error {
	if g.closed {
		return openhandscontrol.ErrGateClosed
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.commands = append(g.commands, cmd)
	return nil
}

func startPausing(t *testing.T, gate component.Component, next *refuseOnce, tel *componenttest.Telemetry) (*aepPolicy, error) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Default.Session.CostUSD = LimitConfig{Soft: 1, Hard: 2}
	cfg.Default.Action = actionPause
	cfg.Control = &controlID
	require.NoError(t, cfg.Validate())
	p, err := newProcessor(component.NewID(componentType), cfg, tel.NewTelemetrySettings(), next)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	return p, p.Start(context.Background(), hosttest.Extensions{controlID: gate})
}

// TestAHardBreachPausesOnce: a hard breach of a policy set with action:
// pause hands the gate one control.pause for its session, whose id and
// cause are the guardrail event's; a soft breach does not; a batch the
// next consumer refused pauses nothing until its retry is taken.
func TestAHardBreachPausesOnce(t *testing.T) {
	gate := &fakeGate{}
	next := &refuseOnce{}
	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()
	p, err := startPausing(t, gate, next, tel)
	require.NoError(t, err)

	var o owner
	soft := logsOf(t, o.event("run.finished", t0, costData(1.5)))
	require.Error(t, p.ConsumeLogs(context.Background(), soft), "refused once")
	require.NoError(t, p.ConsumeLogs(context.Background(), soft))
	assert.Empty(t, gate.commands, "a soft breach only notifies")

	hard := logsOf(t, o.event("run.finished", t0, costData(1)))
	require.NoError(t, p.ConsumeLogs(context.Background(), hard))
	require.NoError(t, p.ConsumeLogs(context.Background(), logsOf(t, o.event("run.finished", t0, costData(1)))))
	_, guardrails := eventsOf(t, next.AllLogs())
	require.Len(t, guardrails, 2)
	require.Len(t, gate.commands, 1, "once per breach")
	cmd := gate.commands[0]
	assert.Equal(t, "control.pause", cmd.Type)
	assert.Equal(t, guardrails[1].ID, cmd.ID)
	assert.Equal(t, guardrails[1].ID, cmd.Cause)
	assert.Equal(t, "conv-1", cmd.Session)
	assert.Equal(t, "aep://aeppolicy/agent/aeppolicy", cmd.Source)
	assert.Nil(t, cmd.Seq, "a command is a foreign emitter's: no seq")
	assert.Equal(t, int64(1), telemetrytest.Counter(t, tel, "otelcol_aeppolicy_actions",
		attribute.String("action", "pause"), attribute.String("outcome", "originated")))
}

// TestAClosedGatePausesNothing: with the gate off the breach is recorded
// and counted, and nothing is sent.
func TestAClosedGatePausesNothing(t *testing.T) {
	gate := &fakeGate{closed: true}
	next := &refuseOnce{refused: true}
	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()
	p, err := startPausing(t, gate, next, tel)
	require.NoError(t, err)
	var o owner
	require.NoError(t, p.ConsumeLogs(context.Background(), logsOf(t, o.event("run.finished", t0, costData(3)))))
	assert.Empty(t, gate.commands)
	assert.Equal(t, int64(1), telemetrytest.Counter(t, tel, "otelcol_aeppolicy_actions", attribute.String("outcome", "gate_closed")))
}

// TestControlMustBeTheGate: a control id that names no openhandscontrol
// extension fails the start, naming the key.
func TestControlMustBeTheGate(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()
	_, err := startPausing(t, hosttest.Inert{}, &refuseOnce{}, tel)
	assert.ErrorContains(t, err, `control: "openhandscontrol" is not a configured openhandscontrol extension`)
}
