// Package capture enforces AEP capture levels (AEP-0001 §8, AEP-0002 §5.1,
// AEP-0003 §9): the per-field x-aep-capture annotations of the payload
// schemas, down-levelling an event under a ceiling at a re-emitting hop,
// and the §9.4 redaction pipeline, for whole strings, JSON values and
// streamed token deltas.
//
// Everything here is pure: no I/O beyond the embedded schemas, and a
// Redactor is configured with values the caller has already resolved.
package capture
