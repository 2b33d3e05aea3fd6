package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// durableState is everything of one conversation that survives a restart
// when the receiver has storage: one value, held by its session (which
// mutates it in place), encoded by encodeState, decoded by decodeState,
// and written with a write-ahead batch (session.emitLocked) or, before a
// control write, alone (saveStateLocked). Everything else is rebuilt on
// start: the socket and its connect-snapshot flag, an open delta stream,
// the dedupe window beyond the resume margin, the idle clock.
type durableState struct {
	// Version is stateVersion when written.
	Version int `json:"v"`
	position
	// Cursor is where the socket resumes.
	Cursor cursor `json:"cursor"`
	// Mapping is the mapper's run, attention and session state.
	Mapping mapping.State `json:"mapping"`
	// Decoration is what the decorator remembers: open tool calls, the open
	// run's start and stats baseline, the server's stats, a run.finished
	// waiting for its usage. Absent (an older state) means nothing known:
	// no duration or usage is put on a run that was open across the
	// upgrade.
	Decoration mapping.DecoratorState `json:"decoration,omitzero"`
	// Control is what the control gate remembers of the conversation: its
	// last decided commands with their recorded acks, written with the
	// batch that carries those acks, so that a command redelivered after a
	// restart is re-acked, never executed again; and the commands whose
	// write was made, or about to be, with no ack yet, written before the
	// write, so that the stream can still decide them. Absent means
	// nothing remembered. Stored under a key of its own when it changes
	// (journal.go); a state of an older release holds it here, where the
	// control key, once written, supersedes it.
	Control openhandscontrol.State `json:"control,omitzero"`
}

// position is where a session's next event goes: the one sequencer's
// state (sessionEmitter).
type position struct {
	// Epoch is the session's generation: its seq counter's epoch and the
	// epoch in its source (sessionSource).
	Epoch int64 `json:"epoch"`
	// NextSeq is the position the next emitted event gets.
	NextSeq int64 `json:"next_seq"`
}

// cursor is where a conversation's socket resumes reading.
type cursor struct {
	// DurableSeq is the last /sockets/session seq processed, -1 before any.
	DurableSeq int64 `json:"durable_seq"`
	// DurableID is that event's vendor id: where a stored event too large
	// for the socket is looked up over REST ("" = unknown).
	DurableID string `json:"durable_id,omitempty"`
	// ResumeTS is the newest vendor timestamp of a persisted event seen;
	// the legacy socket pages history from resumeMargin before it.
	ResumeTS string `json:"resume_ts,omitempty"`
	// FromEnd is set on a conversation start_at: end leaves the history
	// of: its first attach reads none of the log it finds, and sets the
	// cursor at its end.
	FromEnd bool `json:"from_end,omitempty"`
	// Recent are the vendor ids of the overlap window (dedupe.go): the
	// ones a resume can present again, which must be dropped. Taken from
	// the window when stored (snapshotLocked).
	Recent []string `json:"recent,omitempty"`
}

// stateVersion is the version this release writes. Version 1 is the
// first. A field added later follows mapping.State's rule (omitempty, zero
// value = the old meaning), so a state of any older version decodes as is;
// a change that cannot follow it bumps the version and upgrades older
// values in decodeState.
const stateVersion = 1

// errStateVersion marks a state written by a newer release.
var errStateVersion = errors.New("state written by a newer release")

func encodeState(s durableState) ([]byte, error) {
	s.Version = stateVersion
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode conversation state: %w", err)
	}
	return raw, nil
}

func decodeState(raw []byte) (durableState, error) {
	var s durableState
	if err := json.Unmarshal(raw, &s); err != nil {
		return durableState{}, fmt.Errorf("decode conversation state: %w", err)
	}
	switch {
	case s.Version < 1:
		return durableState{}, fmt.Errorf("decode conversation state: version %d is not a state version", s.Version)
	case s.Version > stateVersion:
		return durableState{}, fmt.Errorf("decode conversation state: version %d: %w (this one reads up to %d)", s.Version, errStateVersion, stateVersion)
	case s.Epoch < 0 || s.NextSeq < 0 || s.Cursor.DurableSeq < -1:
		return durableState{}, fmt.Errorf("decode conversation state: negative epoch %d, next_seq %d or durable_seq %d", s.Epoch, s.NextSeq, s.Cursor.DurableSeq)
	}
	return s, nil
}

// sameControl reports whether two control states are the same: the gate
// appends a decision (a new ack) or replaces a pending note, never edits
// one in place.
func sameControl(a, b openhandscontrol.State) bool {
	return slices.Equal(a.Pending, b.Pending) && slices.EqualFunc(a.Decided, b.Decided, func(x, y openhandscontrol.Decision) bool {
		return x.Ack == y.Ack && x.Source == y.Source && x.ID == y.ID && x.Reason == y.Reason
	})
}

func encodeControl(control openhandscontrol.State) ([]byte, error) {
	raw, err := json.Marshal(control)
	if err != nil {
		return nil, fmt.Errorf("encode conversation control state: %w", err)
	}
	return raw, nil
}

func decodeControl(raw []byte) (openhandscontrol.State, error) {
	var control openhandscontrol.State
	if err := json.Unmarshal(raw, &control); err != nil {
		return openhandscontrol.State{}, fmt.Errorf("decode conversation control state: %w", err)
	}
	return control, nil
}
