package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"fmt"
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
	// Bind tells the handler that this exporter hands it commands; it is
	// called once, at Start.
	Bind()
	// Accepts lists the command types the agent accepts over an
	// authenticated link. It is read once per connection, when the hello
	// is built; a link without credentials declares none.
	Accepts() []string
	// AckWindow is the declared ack window (ack_window_ms).
	AckWindow() time.Duration
	// HandleCommand receives one command: raw is the frame exactly as the
	// relay forwarded it (the sender's bytes), ev its decoding, and
	// authenticated whether the link it came over sends the relay
	// credentials (a token, an auth extension or an Authorization header).
	// A command over a link without them must not be executed: anyone
	// between here and the relay, or a hostile relay, could have sent it.
	// It runs on the socket's read loop, so it must return promptly and
	// hand any work off. Acks and outcomes go back as ordinary events
	// through the pipeline; ctx ends when the connection does.
	HandleCommand(ctx context.Context, raw []byte, ev *aep.Event, authenticated bool)
}

// controlLink is the control handler as this exporter's relay link
// presents it: whether the link authenticates decides what the hello
// declares and travels with every command.
type controlLink struct {
	handler       ControlHandler
	authenticated bool
}

// HandleCommand hands a command to the handler with the link's
// authentication.
func (l *controlLink) HandleCommand(ctx context.Context, raw []byte, ev *aep.Event) {
	l.handler.HandleCommand(ctx, raw, ev, l.authenticated)
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
// accepts: [] so that the relay refuses every command on our behalf (no
// handler, or a link without credentials).
func declaredControl(l *controlLink) controlCapability {
	if l == nil {
		return controlCapability{Accepts: []string{}, AckWindowMS: defaultAckWindow.Milliseconds()}
	}
	accepts := []string{}
	if declared := l.handler.Accepts(); l.authenticated && declared != nil {
		accepts = declared
	}
	return controlCapability{Accepts: accepts, AckWindowMS: l.handler.AckWindow().Milliseconds()}
}
