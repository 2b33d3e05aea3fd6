package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// durableState is everything of one conversation that survives a restart
// when the receiver has storage: one value, encoded by encodeState,
// decoded by decodeState, and written with a write-ahead batch
// (conversation.emitLocked) or, before a control write, alone
// (saveStateLocked). Everything else is rebuilt on start: the
// socket and its connect-snapshot flag, an open delta stream, the dedupe
// window beyond the resume margin, the idle clock.
type durableState struct {
	// Version is stateVersion when written.
	Version int `json:"v"`
	// Epoch is the session's generation: its seq counter's epoch and the
	// epoch in its source (sessionSource).
	Epoch int64 `json:"epoch"`
	// NextSeq is the position the next emitted event gets.
	NextSeq int64 `json:"next_seq"`
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
	// write, so that the stream can still decide them. Absent (an older
	// state, or no gate) means nothing remembered.
	Control openhandscontrol.State `json:"control,omitzero"`
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
	// Recent are the vendor ids of the overlap window (dedupe.go): the
	// ones a resume can present again, which must be dropped.
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

// snapshotLocked is the conversation's durable state now. c.mu must be held.
func (c *conversation) snapshotLocked() durableState {
	return durableState{
		Epoch:   c.emitter.epoch,
		NextSeq: c.emitter.seq,
		Cursor: cursor{
			DurableSeq: c.durableSeq,
			DurableID:  c.durableID,
			ResumeTS:   c.resumeTS,
			Recent:     c.overlap.ids(),
		},
		Mapping:    c.mapper.Snapshot(),
		Decoration: c.decorator.State(),
		Control:    c.notes.State(),
	}
}

// restore puts a conversation that has not run yet in state s.
func (c *conversation) restore(s durableState) {
	c.emitter.epoch, c.emitter.seq = s.Epoch, s.NextSeq
	c.durableSeq, c.durableID, c.resumeTS = s.Cursor.DurableSeq, s.Cursor.DurableID, s.Cursor.ResumeTS
	for _, id := range s.Cursor.Recent {
		c.overlap.add(id, c.resumeTS)
	}
	c.mapper.Restore(s.Mapping)
	c.decorator = mapping.NewDecorator(s.Decoration)
	c.notes.Restore(s.Control)
}

// saveStateLocked stores the conversation's state alone, between batches
// (openhandscontrol.Session.Save). c.mu must be held.
func (c *conversation) saveStateLocked(ctx context.Context) error {
	if c.journal == nil {
		return nil
	}
	raw, err := encodeState(c.snapshotLocked())
	if err != nil {
		return err
	}
	key := c.journal.stateKey(c.id)
	if err := c.journal.client.Set(ctx, key, raw); err != nil {
		c.watch.tel.storageErrors.Add(ctx, 1)
		return fmt.Errorf("storage: write %s: %w", key, err)
	}
	c.watch.tel.storageWritten.Add(ctx, int64(len(key)+len(raw)))
	return nil
}
