// Package vendormap is the pure mapping from coding agents' own OTel
// LogRecords (Codex's codex.* records, the VS Code Copilot Chat extension's
// copilot_chat.* and GenAI records) to AEP 0.1 events: no I/O, no clocks,
// no goroutines. The processor reads each record with FromLogRecord, asks
// Classify whose it is and Session which AEP session it belongs to, maps it
// with Map, and assigns source, id, time, epoch and seq itself.
//
// The mapping is pinned by testdata/codex-otel.json and vscode-otel.json
// (AEP-0002 Annex A, copied from the AEP spec repository, Apache-2.0, see
// LICENSE and NOTICE there): every entry, in both modes, at the metadata
// ceiling. What the vendors really export differs from the fixtures'
// flattened strings (typed values, event.kind beside kind, denied beside
// deny); the profiles accept both spellings, and the README lists each
// difference and where it was read.
package vendormap
