// Package projection maps AEP events to OTLP LogRecords (AEP-0005 §3) and
// back.
//
// # Standard attributes
//
// ToLogRecord writes exactly what the reference to_otlp writes, so a record
// stripped of the lossless extras equals fixtures/otlp/otlp-expected.json:
//
//   - time_unix_nano: the event time at microsecond precision (offsets
//     honoured, digits beyond the sixth truncated); ObservedTimestamp is the
//     caller's.
//   - event_name: "dev.aep." + type.
//   - severity_text / severity_number: debug DEBUG/5, info INFO/9, notice
//     INFO2/10, warning WARN/13, error ERROR/17, critical FATAL/21; an absent
//     severity projects as info.
//   - trace_id, span_id, flags: the W3C fields of traceparent.
//   - attributes aep.agent_id, aep.event_id, aep.capture (materialized as
//     "metadata" when absent), aep.source, and only when present
//     aep.session_id, aep.run_id, aep.step, aep.sequence, aep.epoch (never
//     defaulted), aep.causation_id, aep.subject.
//   - top-level data keys beginning "gen_ai." as attributes, verbatim.
//   - the other data keys as the body map; no body when none remain.
//   - resource service.name = agent (SetResource; callers may override it).
//
// With Options.MaxCapture set, an event whose capture ranks above it loses its
// whole payload (body and gen_ai attributes) while aep.capture keeps the
// original value: the pinned to_otlp gate, not a per-field down-level.
//
// # Lossless extras
//
// The standard attributes lose facts. ToLogRecord adds, under WirePrefix
// ("aep.wire.", which no standard attribute starts with), only what
// FromLogRecord needs to rebuild the event byte for byte after canonical
// JSON, and nothing the standard fields already carry:
//
//   - aep.wire.version (string, always): the envelope "aep" version.
//   - aep.wire.time (string): the exact time text, only when it is not the
//     default rendering of time_unix_nano (UTC, "Z", 3, 6 or 9 fraction
//     digits, the fewest that hold the value) or time_unix_nano is 0.
//   - aep.wire.traceparent_version (string): the traceparent version byte,
//     only when it is not "00" or the trace id is all zero (so that the
//     traceparent is known to be present).
//   - aep.wire.severity_defaulted, aep.wire.capture_defaulted (bool true):
//     the event had no severity / capture; the projection materialized it.
//   - aep.wire.data (string): "empty" for "data":{}, "dropped" when the
//     MaxCapture gate removed a payload. Without it, no body and no gen_ai
//     attributes means the event had no data.
//   - aep.wire.ext.<name> (string, int or bool): each extension attribute.
//
// IsWireAttribute matches every one of these keys, the extension keys
// included.
//
// # JSON numbers
//
// Data numbers (json.Number) that are integers within int64 become Int
// AnyValues and come back with the same digits. Every other number becomes a
// Double holding its nearest IEEE-754 value, which is the value RFC 8785
// canonical JSON (aep.Canonical) serializes: integers beyond int64 keep their
// canonical form but not digits beyond double precision, and 1.0 comes back
// as 1. Non-finite values and Bytes AnyValues are refused.
//
// # Inverse
//
// FromLogRecord accepts any record whose event_name starts with "dev.aep."
// and carries the always-present attributes; records written by another
// exporter (without extras) come back with aep "0.1", the default time
// rendering, severity from inverse bucketing of severity_number, explicit
// capture, and no extensions. Attributes outside this contract (added by
// processors, or future aep.* ones) are ignored; unknown aep.wire.* keys are
// refused, since they would carry facts this version cannot restore. A
// payload dropped by the gate comes back as absent data.
package projection
