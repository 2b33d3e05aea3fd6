package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// script plays one agent run on a stub conversation, one step at a time,
// so that tests can interleave conversations or break something between
// two steps.
type script struct {
	t      *testing.T
	conv   *oh.Conversation
	action oh.Event // the harmless tool call
	risky  oh.Event // the tool call that needs confirmation, then fails
}

func newScript(t *testing.T, conv *oh.Conversation) *script {
	return &script{t: t, conv: conv}
}

// runSteps is the run: a user message, the run starting, a tool call and
// its result, a second call held for confirmation (waiting_for_confirmation
// → running), that call failing (is_error), the agent's answer, and the run
// finishing.
var runSteps = []func(*script){
	func(s *script) { s.userMessage("list the files") },
	func(s *script) { s.status(oh.StatusRunning) },
	func(s *script) { s.action = s.append(oh.TerminalAction("ls")) },
	func(s *script) { s.append(oh.ObservationEvent(s.action, "README.md", false)) },
	func(s *script) { s.risky = s.append(oh.TerminalAction("rm -rf /tmp/scratch")) },
	func(s *script) { s.status(oh.StatusWaitingForConfirmation) },
	func(s *script) { s.status(oh.StatusRunning) },
	func(s *script) { s.append(oh.ObservationEvent(s.risky, "rm: permission denied", true)) },
	func(s *script) { s.append(oh.MessageEvent("agent", "Only README.md; rm failed.")) },
	func(s *script) { require.NoError(s.t, s.conv.FinishRun(oh.StatusFinished)) },
}

// runTypes is what runSteps emit, in order, snapshots left out.
var runTypes = []string{
	"x.openhands.message.event", "state.delta", // the message and last_user_message_id
	"run.started", "state.delta",
	"tool.requested", "tool.completed",
	"tool.requested",
	"state.delta", "attention.requested",
	"state.delta", "attention.resolved",
	"tool.failed",
	"x.openhands.message.event",
	"state.delta", "run.finished",
}

// play runs steps [from, to) of runSteps.
func (s *script) play(from, to int) {
	for _, step := range runSteps[from:to] {
		step(s)
	}
}

func (s *script) userMessage(text string) {
	_, err := s.conv.SendUserMessage(text, false)
	require.NoError(s.t, err)
}

func (s *script) status(status string) {
	_, err := s.conv.SetStatus(status)
	require.NoError(s.t, err)
}

func (s *script) append(ev oh.Event) oh.Event {
	out, err := s.conv.Append(ev)
	require.NoError(s.t, err)
	return out
}
