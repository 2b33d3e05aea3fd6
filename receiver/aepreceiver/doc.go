// Package aepreceiver takes AEP 0.1 events from any emitter over the HTTP
// POST binding (AEP-0003 §3.2), and optionally from JSONL session logs
// (§3.1), and emits each as the OTel log record of the AEP-0005 §3
// projection, exactly as the openhands receiver does, so every logs
// pipeline built for that receiver (aeprelay, the aep connector, any logs
// exporter) takes these events unchanged.
//
// Each event is checked before anything enters the pipeline: envelope and
// payload schema, data within its declared capture, and no control
// command. A body is taken whole or refused whole; a JSONL line that fails
// is skipped, and a file's offset moves only once its lines were taken.
// Events above the configured capture ceiling are down-levelled, never
// passed above it.
package aepreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"
