// Package mapping is the pure mapping from OpenHands agent-server events to
// AEP 0.1 events (the design record's map-events.js): no I/O, no clocks, no
// goroutines. The receiver decodes each socket frame with DecodeEvent, feeds
// it to the Conversation that owns the frame's conversation, and assigns
// seq/epoch to what comes out, in one place of its own.
//
// Three pinned surfaces live here, each tested against
// testdata/aep/fixtures/mappings/openhands.json: the per-kind field maps
// (Conversation.Map), the status table behind run synthesis (StatusMoments)
// and the vendor type naming rule (VendorType).
package mapping
