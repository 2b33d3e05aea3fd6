package projection

import (
	"encoding/json"
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schemas"
)

// EventNamePrefix turns an AEP type into an OTel event name.
const EventNamePrefix = "dev.aep."

// eventNames holds the event name of every type the AEP registry lists,
// made once, so that an event of a registered type is not given a name
// built anew; only other types (x.*) have theirs built (eventName).
var eventNames = registeredEventNames()

func registeredEventNames() map[string]string {
	var registry struct {
		Types []struct{ Type string }
	}
	raw, err := schemas.FS.ReadFile("registry/types.json")
	if err == nil {
		err = json.Unmarshal(raw, &registry)
	}
	if err != nil {
		return nil // every name is built: slower, the same
	}
	names := make(map[string]string, len(registry.Types))
	for _, t := range registry.Types {
		names[t.Type] = EventNamePrefix + t.Type
	}
	return names
}

// eventName is the OTel event name of AEP type typ.
func eventName(typ string) string {
	if name, ok := eventNames[typ]; ok {
		return name
	}
	return EventNamePrefix + typ
}

// GenAIPrefix marks the top-level data keys hoisted to attributes.
const GenAIPrefix = "gen_ai."

// Standard attributes of the projection (AEP-0005 §3).
const (
	AttrServiceName = "service.name"
	AttrAgentID     = "aep.agent_id"
	AttrEventID     = "aep.event_id"
	AttrCapture     = "aep.capture"
	AttrSource      = "aep.source"
	AttrSessionID   = "aep.session_id"
	AttrRunID       = "aep.run_id"
	AttrStep        = "aep.step"
	AttrSequence    = "aep.sequence"
	AttrEpoch       = "aep.epoch"
	AttrCausationID = "aep.causation_id"
	AttrSubject     = "aep.subject"
)

// WirePrefix starts every lossless extra; see the package doc.
const WirePrefix = "aep.wire."

// Lossless extras.
const (
	WireVersion            = WirePrefix + "version"
	WireTime               = WirePrefix + "time"
	WireTraceparentVersion = WirePrefix + "traceparent_version"
	WireSeverityDefaulted  = WirePrefix + "severity_defaulted"
	WireCaptureDefaulted   = WirePrefix + "capture_defaulted"
	WireData               = WirePrefix + "data"
	// WireExtensionPrefix + name carries extension attribute name.
	WireExtensionPrefix = WirePrefix + "ext."
)

// Values of WireData.
const (
	WireDataEmpty   = "empty"
	WireDataDropped = "dropped"
)

// IsWireAttribute reports whether key is a lossless extra rather than a
// standard projection attribute.
func IsWireAttribute(key string) bool { return strings.HasPrefix(key, WirePrefix) }
