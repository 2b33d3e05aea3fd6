// Package aepinboundprocessor maps coding agents' own OTel logs (Codex,
// the VS Code Copilot Chat extension) arriving at the otlp receiver to AEP
// 0.1 events, carried as AEP-0005 §3 log records like the openhands
// receiver's, and passes every other record through untouched.
package aepinboundprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"
