// Package aepconnector turns AEP log records (the AEP-0005 §3 projection)
// into traces and metrics: each run a trace, its tool calls and attention
// waits child spans, and the GenAI token, duration and cost metrics ops
// teams chart. It works for any AEP source; ids follow internal/aep/runtrace,
// so the spans match the trace context the emitter stamped on its records.
package aepconnector // import "github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"
