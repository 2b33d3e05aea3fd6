package openhandsreceiver

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// Servers v1.37.0+ send parent_id on the sockets too: an event's AEP cause
// is the first AEP event its parent was mapped to; a tool call's answer
// keeps its tool.requested, which keys its span.
func TestParentIDBecomesCause(t *testing.T) {
	bothSockets(t, func(t *testing.T, socket string) {
		stub := startStub(t)
		conv, h := watchNew(t, stub, socket)
		msg := mustAppend(t, conv, oh.MessageEvent("user", "list the files"))
		action := mustAppend(t, conv, oh.ActionEvent(oh.ActionSpec{}))
		obs := mustAppend(t, conv, oh.ObservationEvent(action, "total 0", false))
		reply := mustAppend(t, conv, oh.MessageEvent("agent", "done"))
		require.Equal(t, obs.ID(), reply["parent_id"], "the stub stamps the leaf as parent")
		h.waitTypes(conv.ID(), "tool.requested", "tool.completed", "x.openhands.message.event")

		first := map[string]*aep.Event{}
		for _, ev := range h.session(conv.ID()) {
			if id, _ := ev.Data["vendor_event_id"].(string); id != "" && first[id] == nil {
				first[id] = ev
			}
		}
		assert.Equal(t, first[msg.ID()].ID, first[action.ID()].Cause, "the tool call names the message it followed")
		assert.Equal(t, first[action.ID()].ID, first[obs.ID()].Cause, "the answer names its call (the decorator's cause)")
		assert.Equal(t, first[obs.ID()].ID, first[reply.ID()].Cause)
		assert.Empty(t, first[msg.ID()].Cause, "its parent came before the receiver: not in the window")
		h.validate()
	})
}

// linkLocked gives an event its parent's AEP event as cause, unless the
// event answers a tool call or an attention request (its cause is what it
// answers, even when the decorator knows none); transient events are never
// parents, so a burst of deltas does not push the head out of the window.
func TestLinkLocked(t *testing.T) {
	for _, tc := range []struct {
		name      string
		childType string
		deltas    int // transient events between parent and child
		wantCause bool
	}{
		{name: "message", childType: "x.openhands.message.event", wantCause: true},
		{name: "tool call", childType: "tool.requested", wantCause: true},
		{name: "tool answer", childType: "tool.completed"},
		{name: "attention answer", childType: "attention.resolved"},
		{name: "after a burst of deltas", childType: "x.openhands.message.event", deltas: 2 * lineageWindow, wantCause: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := offlineConversation(t, "lineage").session
			parent := eventOf(t, map[string]any{"id": "p", "kind": "MessageEvent", "source": "user"})
			s.linkLocked(parent, []*aep.Event{{ID: "aep-p"}})
			for i := range tc.deltas {
				delta := eventOf(t, map[string]any{"id": fmt.Sprintf("d%d", i), "kind": "StreamingDeltaEvent", "source": "agent"})
				require.True(t, delta.Transient())
				s.linkLocked(delta, []*aep.Event{{ID: fmt.Sprintf("aep-d%d", i)}})
			}
			child := &aep.Event{ID: "aep-c", Type: tc.childType}
			s.linkLocked(eventOf(t, map[string]any{"id": "c", "kind": "ActionEvent", "source": "agent", "parent_id": "p"}), []*aep.Event{child})
			if tc.wantCause {
				assert.Equal(t, "aep-p", child.Cause)
			} else {
				assert.Empty(t, child.Cause)
			}
		})
	}
}

// eventOf is the agent-server event of fields, decoded.
func eventOf(tb testing.TB, fields map[string]any) mapping.Event {
	tb.Helper()
	ev, err := mapping.EventOf(fields)
	require.NoError(tb, err)
	return ev
}
