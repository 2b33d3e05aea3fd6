package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// TestRelayDownAtStart: the relay refuses every connection from before the
// collector starts until the whole run is over. The events wait in the
// exporter's queue and all arrive once the relay serves again.
func TestRelayDownAtStart(t *testing.T) {
	e := newEnv(t)
	e.relay.SetDown(true)
	e.start(pipelineConfig{})
	conv := e.newConversation()
	e.awaitOTLPLive(conv, 1)
	newScript(t, conv).play(0, len(runSteps))
	e.awaitOTLPTypes(conv, runTypes...) // the run went through the pipeline

	assert.Zero(t, e.relay.Received(), "a relay that is down admits nothing")
	e.relay.SetDown(false)
	e.awaitTypes(conv, runTypes...)
	assert.Equal(t, append([]string{"session.started"}, runTypes...), types(e.relayEvents(conv.ID())))
	e.verify(conv)
}

// TestRelayLostMidStream breaks the relay while a conversation streams tool
// calls. Nothing may be lost, and whatever the exporter sends again must be
// the same event under the same id: the relay's stream checker reports an
// id naming two different events as a violation, which verify fails on.
func TestRelayLostMidStream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, relay *aeprelaytest.Relay)
	}{
		{
			// An orderly restart: `closing`, close 1001, listen again.
			name: "restart",
			fault: func(t *testing.T, relay *aeprelaytest.Relay) {
				require.NoError(t, relay.Restart(aeprelaytest.KeepState))
			},
		},
		{
			// A crash: TCP cut without a close frame, refused while down.
			name: "kill",
			fault: func(_ *testing.T, relay *aeprelaytest.Relay) {
				relay.SetDown(true)
				relay.DropConnections()
				time.Sleep(200 * time.Millisecond)
				relay.SetDown(false)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.start(pipelineConfig{})
			conv := e.newConversation()
			e.awaitLive(conv, 1)
			_, err := conv.SetStatus(oh.StatusRunning)
			require.NoError(t, err)

			const toolCalls = 40
			produced := make(chan error, 1)
			go func() { produced <- produceToolCalls(conv, toolCalls, 5*time.Millisecond) }()
			// Break the relay once the stream flows through it.
			awaitEvents(t, "relay", func() []*aep.Event { return e.relayEvents(conv.ID()) }, func(evs []*aep.Event) bool {
				return countType(evs, "tool.completed") >= 5
			})
			tc.fault(t, e.relay)
			select {
			case err := <-produced:
				require.NoError(t, err)
			case <-time.After(waitFor):
				t.Fatal("the producer did not finish")
			}
			_, err = conv.SetStatus(oh.StatusFinished)
			require.NoError(t, err)

			got := e.awaitTypes(conv, "state.delta", "run.finished")
			assert.Equal(t, toolCalls, countType(got, "tool.completed"))
			assert.GreaterOrEqual(t, len(e.relay.Hellos()), 2, "the exporter connected again after the fault")
			e.verify(conv)
			t.Logf("%d events, %d deliveries", len(e.relay.Events()), e.relay.Received())
		})
	}
}

// produceToolCalls appends n tool calls with their results to conv,
// pausing between calls so that a fault lands in the middle of the stream.
func produceToolCalls(conv *oh.Conversation, n int, pause time.Duration) error {
	for i := range n {
		action, err := conv.Append(oh.TerminalAction(fmt.Sprintf("echo %d", i)))
		if err != nil {
			return fmt.Errorf("append tool call %d: %w", i, err)
		}
		if _, err := conv.Append(oh.ObservationEvent(action, fmt.Sprint(i), false)); err != nil {
			return fmt.Errorf("append result %d: %w", i, err)
		}
		time.Sleep(pause)
	}
	return nil
}

// TestRelayStopsAnsweringPong: while the relay leaves pings unanswered, the
// batches it admits stay unconfirmed, so the exporter must send them again
// under the same ids; once pongs come back the rest of the run flows, and
// nothing is lost.
func TestRelayStopsAnsweringPong(t *testing.T) {
	e := newEnv(t)
	e.start(pipelineConfig{confirmTimeout: 300 * time.Millisecond})
	conv := e.newConversation()
	e.awaitLive(conv, 1)

	e.relay.SetPong(aeprelaytest.PongMode{Never: true})
	s := newScript(t, conv)
	s.play(0, 3) // the user message, the run starting, a tool call
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, e.relay.WaitFor(ctx, func(r *aeprelaytest.Relay) bool {
		return r.Received() > len(r.Events())
	}), "an unconfirmed batch is sent again")

	e.relay.SetPong(aeprelaytest.PongMode{})
	s.play(3, len(runSteps))
	e.awaitTypes(conv, runTypes...)
	e.verify(conv)
}

// TestAgentServerRestartMidRun restarts the agent server while a tool call
// is in flight: the server recovers the conversation as `error` and fails
// the orphaned call, so the run ends run.failed, and every vendor event
// still reaches the relay once, on either socket.
func TestAgentServerRestartMidRun(t *testing.T) {
	for _, socket := range sockets {
		t.Run("socket="+socket.name, func(t *testing.T) {
			e := newEnv(t)
			e.start(pipelineConfig{socket: socket.name})
			conv := e.newConversation()
			e.awaitLive(conv, 1)
			s := newScript(t, conv)
			s.play(0, 3) // the user message, the run starting, a tool call
			e.awaitTypes(conv, "run.started", "state.delta", "tool.requested")

			require.NoError(t, e.stub.Restart())
			e.awaitLive(conv, 2) // the receiver is back on the restarted server
			got := e.awaitTypes(conv, "state.delta", "run.failed", "tool.failed")
			assert.Equal(t, "error", last(got, "run.failed").Data["reason"])
			assert.Equal(t, 1, countType(got, "run.started"), "one run across the restart")
			assert.Equal(t, oh.StatusError, conv.Status())
			assertSocketPath(t, e.stub, socket.path)
			e.verify(conv)
		})
	}
}
