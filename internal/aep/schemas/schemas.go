// Package schemas embeds the AEP 0.1 JSON Schemas and registries
// (Apache-2.0, see LICENSE and NOTICE beside this file) so that validation and
// capture down-levelling read the same annotations the spec publishes.
package schemas

import "embed"

// FS holds aep-event.schema.json, types/*.schema.json and registry/*.json.
//
//go:embed aep-event.schema.json types/*.json registry/*.json
var FS embed.FS

// EnvelopePath is the envelope schema's path inside FS.
const EnvelopePath = "aep-event.schema.json"

// TypePath returns the path inside FS of the payload schema for an event type.
// Vendor (x.*) types have none.
func TypePath(eventType string) string {
	return "types/" + eventType + ".schema.json"
}
