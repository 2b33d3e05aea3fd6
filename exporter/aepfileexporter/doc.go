// Package aepfileexporter writes AEP 0.1 session logs: the JSONL binding
// (AEP-0003 §3.1), one file per session under {directory}/{agent}/. Each
// log record is turned back into its AEP event with the inverse OTLP
// projection (AEP-0005 §3), validated, optionally down-levelled under
// max_capture, and appended as one line in one write, so `tail -f` is a
// conformant consumer.
//
// Timeout, retry and the sending queue are exporterhelper's; this package
// holds the layout, the deduplication of redeliveries, the fsync policies
// and the bound on open files.
package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"
