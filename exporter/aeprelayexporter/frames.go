package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// WebSocket frame types (AEP-0003 §2.2) this exporter writes or reads.
const (
	frameHello   = "hello"
	framePing    = "ping"
	framePong    = "pong"
	frameError   = "error"
	frameClosing = "closing"
)

// Connection-level error codes that no redial can cure.
const (
	codeVersionUnsupported = "version-unsupported"
	codeHelloRequired      = "hello-required"
)

// helloFrame is the emitter's hello (AEP-0003 §2.3).
type helloFrame struct {
	Type         string            `json:"type"`
	Versions     []string          `json:"versions"`
	Role         string            `json:"role"`
	Identity     helloIdentity     `json:"identity"`
	Capabilities helloCapabilities `json:"capabilities"`
}

type helloIdentity struct {
	Agent    string `json:"agent"`
	Instance string `json:"instance"`
}

type helloCapabilities struct {
	// Emits and Capture are routing hints; Control is authoritative.
	// Emits is absent on the links of other agents, whose categories this
	// exporter does not know.
	Emits   []string          `json:"emits,omitzero"`
	Capture []aep.Capture     `json:"capture"`
	Control controlCapability `json:"control"`
}

// newHello builds the hello. The capture levels declared are those at or
// below the ceiling (all of them without one).
func newHello(agent, instance string, emits []string, ceiling aep.Capture, control controlCapability) helloFrame {
	if ceiling == "" {
		ceiling = aep.CaptureFull
	}
	var levels []aep.Capture
	for _, level := range []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull} {
		if level.Rank() <= ceiling.Rank() {
			levels = append(levels, level)
		}
	}
	return helloFrame{
		Type:         frameHello,
		Versions:     []string{aep.Version},
		Role:         "emitter",
		Identity:     helloIdentity{Agent: agent, Instance: instance},
		Capabilities: helloCapabilities{Emits: emits, Capture: levels, Control: control},
	}
}

// pingFrame is a ping or a pong; t is echoed verbatim.
type pingFrame struct {
	Type string          `json:"type"`
	T    json.RawMessage `json:"t,omitempty"`
}

// closingFrame announces an orderly close. An emitter holds no
// subscriptions, so it has delivered nothing.
type closingFrame struct {
	Type      string `json:"type"`
	Reason    string `json:"reason"`
	Delivered []any  `json:"delivered"`
}

// inboundFrame holds the fields the exporter reads from any relay frame.
type inboundFrame struct {
	Type     string          `json:"type"`
	T        json.RawMessage `json:"t"`
	Versions []string        `json:"versions"`
	Code     string          `json:"code"`
	Cause    string          `json:"cause"`
	ID       string          `json:"id"`
	Detail   json.RawMessage `json:"detail"`
	Reason   string          `json:"reason"`
}

// parseFrame decodes a text frame's head.
func parseFrame(raw []byte) (inboundFrame, error) {
	var f inboundFrame
	if err := json.Unmarshal(raw, &f); err != nil {
		return f, fmt.Errorf("relay frame is not a JSON object: %w", err)
	}
	if f.Type == "" {
		return f, errors.New("relay frame has no type")
	}
	return f, nil
}

// isEvent tells events from frames: an event's type has a dot.
func (f inboundFrame) isEvent() bool { return strings.Contains(f.Type, ".") }

// pingToken is the comparable form of a ping's t.
func pingToken(t json.RawMessage) string { return string(bytes.TrimSpace(t)) }

// detailText renders an error frame's optional detail for a log line.
func (f inboundFrame) detailText() string {
	var s string
	if json.Unmarshal(f.Detail, &s) == nil {
		return s
	}
	return string(f.Detail)
}

// relayError is a connection-level error frame.
type relayError struct {
	code, detail string
	versions     []string
}

func (e *relayError) Error() string {
	switch e.code {
	case codeVersionUnsupported:
		return fmt.Sprintf("relay does not speak AEP %s (version-unsupported; it supports %v)", aep.Version, e.versions)
	case codeHelloRequired:
		return "relay did not receive our hello first (hello-required)"
	}
	if e.detail != "" {
		return fmt.Sprintf("relay error %s: %s", e.code, e.detail)
	}
	return "relay error " + e.code
}

// fatal reports whether no redial can cure the error.
func (e *relayError) fatal() bool {
	return e.code == codeVersionUnsupported || e.code == codeHelloRequired
}
