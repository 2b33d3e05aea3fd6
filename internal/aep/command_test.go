package aep

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIsCommand(t *testing.T) {
	for _, tc := range []struct {
		eventType string
		want      bool
	}{
		{"control.pause", true},
		{"control.resume", true},
		{"control.cancel", true},
		{"control.attention.respond", true},
		{"control.steer", true}, // a core verb this build does not know
		{"x.openhands.control.send_input", true},
		{"x.openhands.control.interrupt", true},
		{"x.acme.control.reboot.now", true},
		{"control.accepted", false},
		{"control.rejected", false},
		{"attention.routed", false},
		{"state.delta", false},
		{"x.openhands.pause.event", false},
		{"x.openhands.control_pause.event", false},
		{"x.control.pause", false}, // vendor "control", category "pause"
		{"xcontrol.pause", false},
		{"", false},
	} {
		t.Run(tc.eventType, func(t *testing.T) {
			assert.Equal(t, tc.want, IsCommand(tc.eventType))
		})
	}
}
