// Package e2e holds the end-to-end tests and the end-to-end throughput
// benchmark of the otelcol-openhands distribution. They build the real
// collector service in-process (otelcol.NewCollector with the
// distribution's own factories) and run it between a stub OpenHands agent
// server (internal/testing/openhandstest) and a conformant AEP relay
// (internal/testing/aeprelaytest), with an OTLP/HTTP sink on the second exporter:
//
//	stub agent server → openhands receiver → batch → aeprelay exporter → relay
//	                                                → otlphttp exporter  → sink
//
// Everything listens on 127.0.0.1. The package has no non-test code.
package e2e
