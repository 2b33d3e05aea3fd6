// Package aeppolicyprocessor watches the AEP events of every agent for
// budgets crossed, agents repeating themselves and runs gone quiet, and
// records each breach once as an assessment.guardrail.recorded event in a
// stream of its own, beside a metric alert rules fire on. Every record
// passes through unchanged.
package aeppolicyprocessor // import "github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor"
