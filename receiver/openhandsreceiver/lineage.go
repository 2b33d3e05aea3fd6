package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"strings"

	"github.com/otelcol-openhands/otelcol-openhands/internal/recent"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// rootParentID is the SDK's reserved parent_id of a tree root
// (openhands/sdk/event/types.py ROOT_PARENT_ID).
const rootParentID = "__root__"

// Windows of vendorIDs: lineage alone needs the recent events (a parent_id
// names the conversation's head, the last event that is not a state
// update); with the webhook on, it also dedupes the channels, whose copies
// of one event are apart by the webhook's buffering (flush_delay, 30 s by
// default).
const (
	lineageWindow = 32
	webhookWindow = 4096
)

// vendorIDs remembers, for the last capacity stored events a conversation
// processed on any channel, the id of the first AEP event each one was
// mapped to ("" for none): the cause an event naming it as parent_id
// gets, and, with the webhook on, the proof that a second copy of it is a
// repeat.
type vendorIDs struct {
	recent.Window[string]
}

func newVendorIDs(capacity int) *vendorIDs {
	return &vendorIDs{recent.New[string](capacity)}
}

// parentID is the vendor event's parent_id: its predecessor in the
// conversation tree; "" when it has none (a root, or a transport that
// strips it: the legacy socket of servers v1.31.2–v1.36.1).
func parentID(ev mapping.Event) string {
	p, _ := ev.Fields["parent_id"].(string)
	if p == rootParentID {
		return ""
	}
	return p
}

// answers reports whether typ answers a tool call or an attention request.
func answers(typ string) bool {
	return (strings.HasPrefix(typ, "tool.") || strings.HasPrefix(typ, "attention.")) && !strings.HasSuffix(typ, ".requested")
}
