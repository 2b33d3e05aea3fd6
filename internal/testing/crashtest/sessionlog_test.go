package crashtest

import (
	"bytes"
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
)

// eventKey is an event's identity, (source, id).
type eventKey struct{ source, id string }

// sessionLogLine is one line of a session log and where it is.
type sessionLogLine struct {
	path  string
	line  int
	raw   []byte
	event *aep.Event // nil when the line is not an event
}

// readSessionLogs reads every session log under dir ({agent}/{session}.jsonl
// and the agents' own logs), in file order.
func readSessionLogs(t *testing.T, dir string) map[string][]sessionLogLine {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := filepath.Glob(filepath.Join(dir, "*", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	logs := make(map[string][]sessionLogLine)
	for _, path := range append(paths, sessions...) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.Split(bytes.TrimSuffix(raw, []byte{'\n'}), []byte{'\n'}) {
			ev, _ := aep.Parse(line)
			logs[path] = append(logs[path], sessionLogLine{path: path, line: i + 1, raw: line, event: ev})
		}
	}
	return logs
}

// awaitSessionLogs waits until the session logs hold every event the relay
// has.
func awaitSessionLogs(t *testing.T, dir string, relay *aeprelaytest.Relay) {
	t.Helper()
	awaitNoneMissing(t, "events at the relay never reached the session logs", func() int {
		inLogs := make(map[eventKey]bool)
		for _, lines := range readSessionLogs(t, dir) {
			for _, l := range lines {
				if l.event != nil {
					inLogs[eventKey{l.event.Source, l.event.ID}] = true
				}
			}
		}
		missing := 0
		for _, r := range relay.Events() {
			if !inLogs[eventKey{r.Event.Source, r.Event.ID}] {
				missing++
			}
		}
		return missing
	})
}

// verifySessionLogs checks what the aepfile exporter wrote across the
// kills: every line a whole, valid event (no torn line, no blank line);
// each (source, id) once, though the persistent queue redelivered what it
// was writing when killed; the same events as the relay's; each session
// in its own log, its positions gap free; and the stream checker finding
// nothing but backfills (the queue moves the request it was writing when
// killed behind later ones, as it does for the relay).
func verifySessionLogs(t *testing.T, dir string, relay *aeprelaytest.Relay, convs []*oh.Conversation) {
	t.Helper()
	logs := readSessionLogs(t, dir)
	written := make(map[eventKey]sessionLogLine)
	bySession := make(map[string][]*aep.Event)
	lines, backfilled := 0, 0
	for path, file := range logs {
		var checker stream.Checker
		for _, l := range file {
			lines++
			if err := schema.ValidateJSON(l.raw); err != nil {
				t.Errorf("%s line %d: %v", path, l.line, err)
				continue
			}
			key := eventKey{l.event.Source, l.event.ID}
			if first, ok := written[key]; ok {
				t.Errorf("%s line %d repeats %s line %d (%s)", path, l.line, first.path, first.line, l.event.ID)
				continue
			}
			written[key] = l
			if l.event.Session != "" && l.event.Seq != nil {
				bySession[l.event.Session] = append(bySession[l.event.Session], l.event)
			}
			if err := checker.Add(l.event); err != nil {
				if errors.Is(err, stream.ErrOrdering) {
					backfilled++
					continue
				}
				t.Errorf("%s line %d: %v", path, l.line, err)
			}
		}
	}
	atRelay := relay.Events()
	for _, r := range atRelay {
		if _, ok := written[eventKey{r.Event.Source, r.Event.ID}]; !ok {
			t.Errorf("event %s (%s) reached the relay but not the session logs", r.Event.ID, r.Event.Type)
		}
	}
	if len(written) != len(atRelay) {
		t.Errorf("the session logs hold %d events, the relay %d", len(written), len(atRelay))
	}
	for _, c := range convs {
		events := bySession[c.ID()]
		slices.SortFunc(events, func(a, b *aep.Event) int {
			return cmp.Or(cmp.Compare(a.EffectiveEpoch(), b.EffectiveEpoch()), cmp.Compare(*a.Seq, *b.Seq))
		})
		assertGapFree(t, events)
	}
	t.Logf("session logs: %d files, %d lines, %d events, %d backfills", len(logs), lines, len(written), backfilled)
}
