package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
)

// sessionLogFile is the aepfile exporter's log of the demo's session, as
// read so far.
type sessionLogFile struct {
	path  string
	lines [][]byte
	// ended: the log holds the session's session.ended.
	ended bool
}

// findSessionLog reads the session log of session under dir
// ({dir}/{agent}/{session}.jsonl); the zero value until it exists.
func findSessionLog(dir, session string) sessionLogFile {
	paths, _ := filepath.Glob(filepath.Join(dir, "*", "*.jsonl"))
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil || len(raw) == 0 {
			continue
		}
		log := sessionLogFile{path: path, lines: bytes.Split(bytes.TrimSuffix(raw, []byte{'\n'}), []byte{'\n'})}
		for _, line := range log.lines {
			if ev, err := aep.Parse(line); err == nil && ev.Session == session {
				log.ended = log.ended || ev.Type == "session.ended"
			}
		}
		if log.ended {
			return log
		}
	}
	return sessionLogFile{}
}

// check judges the log as the conformance runner would: every line a valid
// event, the lines a valid stream.
func (l sessionLogFile) check() error {
	var checker stream.Checker
	for i, line := range l.lines {
		if err := schema.ValidateJSON(line); err != nil {
			return fmt.Errorf("session log %s line %d: %w", l.path, i+1, err)
		}
		ev, err := aep.Parse(line)
		if err != nil {
			return fmt.Errorf("session log %s line %d: %w", l.path, i+1, err)
		}
		if err := checker.Add(ev); err != nil {
			return fmt.Errorf("session log %s line %d: %w", l.path, i+1, err)
		}
	}
	return nil
}
