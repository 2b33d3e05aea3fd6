package openhandsreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
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
