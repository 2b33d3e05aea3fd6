package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// defaultAckWindow is AEP-0004 §3's default ack window, declared when no
// control extension is configured.
const defaultAckWindow = 10 * time.Second

// ControlHandler is what the extension named by the control key
// implements: it declares the commands the agent accepts (the hello's
// capabilities.control, which the relay treats as authoritative) and
// receives each command the relay routes to this connection.
type ControlHandler interface {
	// Accepts lists the command types the agent accepts. It is read once
	// per connection, when the hello is built.
	Accepts() []string
	// AckWindow is the declared ack window (ack_window_ms).
	AckWindow() time.Duration
	// HandleCommand receives one command: raw is the frame exactly as the
	// relay forwarded it (the sender's bytes), ev its decoding. It runs on
	// the socket's read loop, so it must return promptly and hand any work
	// off. Acks and outcomes go back as ordinary events through the
	// pipeline; ctx ends when the connection does.
	HandleCommand(ctx context.Context, raw []byte, ev *aep.Event)
}

// findControlHandler looks the control extension up among the host's
// extensions.
func findControlHandler(id component.ID, extensions map[component.ID]component.Component) (ControlHandler, error) {
	ext, ok := extensions[id]
	if !ok {
		return nil, fmt.Errorf("control: extension %q is not configured in service::extensions", id)
	}
	h, ok := ext.(ControlHandler)
	if !ok {
		return nil, fmt.Errorf("control: extension %q does not accept AEP commands (it does not implement ControlHandler)", id)
	}
	return h, nil
}

// controlCapability is the hello's capabilities.control block.
type controlCapability struct {
	Accepts     []string `json:"accepts"`
	AckWindowMS int64    `json:"ack_window_ms"`
}

// declaredControl is what the hello declares: the handler's block, or
// accepts: [] so that the relay refuses every command on our behalf.
func declaredControl(h ControlHandler) controlCapability {
	if h == nil {
		return controlCapability{Accepts: []string{}, AckWindowMS: defaultAckWindow.Milliseconds()}
	}
	accepts := h.Accepts()
	if accepts == nil {
		accepts = []string{}
	}
	return controlCapability{Accepts: accepts, AckWindowMS: h.AckWindow().Milliseconds()}
}

var vendorCommand = regexp.MustCompile(`^x\.[a-z0-9_-]+\.control\.`)

// isCommand reports whether an event type is a command (AEP-0004 §2):
// control.{imperative} or x.{vendor}.control.{verb}. The acks
// control.accepted and control.rejected are facts, not commands.
func isCommand(eventType string) bool {
	switch eventType {
	case "control.accepted", "control.rejected":
		return false
	}
	return strings.HasPrefix(eventType, "control.") || vendorCommand.MatchString(eventType)
}
