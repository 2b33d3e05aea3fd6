package livetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// TestRecordThenReplay proves the recording machinery without Python: a
// receiver watches the stub agent server through a recording Front, and
// the recording, replayed to a second receiver, yields the same stream.
func TestRecordThenReplay(t *testing.T) {
	for _, mode := range Recorded {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			stub := oh.Start(t, oh.Config{SessionAPIKeys: []string{SessionKey}})
			rec, err := NewRecorder(stub.URL())
			require.NoError(t, err)
			front, err := StartFront(rec)
			require.NoError(t, err)
			t.Cleanup(front.Close)
			t.Cleanup(rec.Close)

			conv, err := stub.CreateConversation(oh.ConversationOptions{Title: "record me"})
			require.NoError(t, err)
			sink := new(consumertest.LogsSink)
			stop := startReceiver(t, ReceiverYAML(mode, aep.CaptureFull, front.ProxyURL()), sink)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			require.NoError(t, conv.WaitSockets(ctx, 1))
			playTurn(t, conv)
			// session.started, the connect snapshot, the turn's 12 events and
			// the end-of-run snapshot.
			require.Eventually(t, func() bool { return len(emitted(t, sink)[conv.ID()]) == 15 }, 15*time.Second, 10*time.Millisecond)
			stop()
			live := emitted(t, sink)

			replayer := NewReplayer(rec.Transcript())
			replayFront, err := StartFront(replayer)
			require.NoError(t, err)
			t.Cleanup(replayFront.Close)
			t.Cleanup(replayer.Close)
			replayed := new(consumertest.LogsSink)
			startReceiver(t, ReceiverYAML(mode, aep.CaptureFull, replayFront.ProxyURL()), replayed)
			requireReplayed(t, replayer, replayed, live)
		})
	}
}

// playTurn scripts one turn: a message, a tool call under confirmation, a
// failing observation, the run's end.
func playTurn(t *testing.T, conv *oh.Conversation) {
	_, err := conv.SendUserMessage("list the files", false)
	require.NoError(t, err)
	_, err = conv.SetStatus(oh.StatusRunning)
	require.NoError(t, err)
	action, err := conv.Append(oh.TerminalAction("ls /missing"))
	require.NoError(t, err)
	_, err = conv.SetStatus(oh.StatusWaitingForConfirmation)
	require.NoError(t, err)
	_, err = conv.SetStatus(oh.StatusRunning)
	require.NoError(t, err)
	_, err = conv.Append(oh.ObservationEvent(action, "ls: cannot access '/missing'", true))
	require.NoError(t, err)
	require.NoError(t, conv.FinishRun(oh.StatusFinished))
}
