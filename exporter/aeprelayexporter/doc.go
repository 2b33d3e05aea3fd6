// Package aeprelayexporter relays AEP 0.1 events to an AEP relay
// (AEP-0003). Each log record is turned back into its AEP event with the
// inverse OTLP projection (AEP-0005 §3), validated, optionally down-levelled
// under max_capture, and sent on the relay's WebSocket binding (the default:
// a link per agent identity, each confirming its batches with a ping/pong
// round trip, the configured agent's carrying control commands back) or its
// HTTP POST binding.
//
// Timeout, retry and the sending queue are exporterhelper's; this package
// holds only what no helper could write: the conversion, the two bindings
// and the relay links.
package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"
