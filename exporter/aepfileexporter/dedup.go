package aepfileexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/recent"
)

// dedup tells an event a log already holds from a new one: an at-least-once
// upstream redelivers, and a redelivered event is not written twice.
//
// An event with a seq (every session-scoped event) is known by its
// (source, epoch, seq), exactly: the seqs written are held as ranges per
// (source, epoch), so a stream written in order is one range whatever its
// length, and a redelivery of any length and order is recognized. Only
// seq gaps (legal, AEP-0001 §7 rule 2), backfills and epochs cost a range
// each; past limit ranges the lowest of the stream being written, else of
// the least recently written one, are forgotten, and a redelivery of them
// would be written again. The ids of the last limit positions written are
// kept too: an event at one of them under another id is another event (an
// emitter that reused a position, as aepinbound may after a refusal its
// sender never retried), written, not dropped. An event without a seq
// (agent-scoped) is known by (source, id) among the last limit such
// events. A limit of 0 remembers nothing.
type dedup struct {
	limit int
	ids   recent.Window[struct{}]
	// positions maps the last positions written to their events' ids
	// (more than one only where a position was reused).
	positions recent.Window[*[]string]
	seqs      map[streamKey]*seqRanges
	ranges    int // held in seqs, at most limit
	// clock orders stream use for eviction.
	clock uint64
}

// streamKey is one emitter's seq space in a session (AEP-0001 §7).
type streamKey struct {
	source string
	epoch  int64
}

// seqRanges are disjoint, sorted, non-adjacent [lo, hi] seq ranges.
type seqRanges struct {
	r []seqRange
	// used orders streams for eviction: the least recently written goes.
	used uint64
}

type seqRange struct{ lo, hi int64 }

func newDedup(limit int) *dedup {
	return &dedup{limit: limit, ids: recent.New[struct{}](limit), positions: recent.New[*[]string](limit), seqs: make(map[streamKey]*seqRanges)}
}

// forgetPositions drops what a closed log need not keep: the ranges tell
// its redeliveries, and a reused position comes right after the first.
func (d *dedup) forgetPositions() { d.positions = recent.New[*[]string](d.limit) }

// eventKey is what dedup knows an event by.
type eventKey struct {
	source, id string
	epoch      int64
	seq        *int64
}

func keyOfEvent(ev *aep.Event) eventKey {
	k := eventKey{source: ev.Source, id: ev.ID, seq: ev.Seq}
	if ev.Epoch != nil {
		k.epoch = *ev.Epoch
	}
	return k
}

func (k eventKey) idKey() string { return k.source + "\x00" + k.id }

func (k eventKey) positionKey() string {
	return k.source + "\x00" + strconv.FormatInt(k.epoch, 10) + "\x00" + strconv.FormatInt(*k.seq, 10)
}

func (d *dedup) has(k eventKey) bool {
	if d.limit <= 0 {
		return false
	}
	if k.seq == nil {
		return d.ids.Has(k.idKey())
	}
	s, ok := d.seqs[streamKey{k.source, k.epoch}]
	if !ok || !s.has(*k.seq) {
		return false
	}
	ids := d.positions.Get(k.positionKey())
	return ids == nil || slices.Contains(*ids, k.id)
}

func (d *dedup) add(k eventKey) {
	if d.limit <= 0 {
		return
	}
	if k.seq == nil {
		d.ids.Put(k.idKey(), struct{}{})
		return
	}
	pos := k.positionKey()
	if !d.positions.Put(pos, &[]string{k.id}) {
		if ids := d.positions.Get(pos); !slices.Contains(*ids, k.id) {
			*ids = append(*ids, k.id)
		}
	}
	sk := streamKey{k.source, k.epoch}
	s, ok := d.seqs[sk]
	if !ok {
		s = &seqRanges{}
		d.seqs[sk] = s
	}
	d.clock++
	s.used = d.clock
	d.ranges += s.add(*k.seq)
	for d.ranges > d.limit {
		d.forget(sk)
	}
}

// forget drops the lowest range of the stream just written, if it has
// more than one, else of the least recently written other stream.
func (d *dedup) forget(written streamKey) {
	victim := written
	if len(d.seqs[written].r) == 1 {
		var oldest uint64
		for sk, s := range d.seqs {
			if sk != written && (oldest == 0 || s.used < oldest) {
				victim, oldest = sk, s.used
			}
		}
	}
	s := d.seqs[victim]
	s.r = slices.Delete(s.r, 0, 1)
	d.ranges--
	if len(s.r) == 0 {
		delete(d.seqs, victim)
	}
}

func (s *seqRanges) has(seq int64) bool {
	i, found := s.search(seq)
	return found || i > 0 && s.r[i-1].hi >= seq
}

// search is the index of the first range starting at or after seq, and
// whether one starts at seq.
func (s *seqRanges) search(seq int64) (int, bool) {
	return slices.BinarySearchFunc(s.r, seq, func(r seqRange, seq int64) int {
		switch {
		case r.lo < seq:
			return -1
		case r.lo > seq:
			return 1
		}
		return 0
	})
}

// add puts seq in the ranges and returns the change in their number.
func (s *seqRanges) add(seq int64) int {
	if s.has(seq) {
		return 0
	}
	i, _ := s.search(seq)
	joinsPrev := i > 0 && s.r[i-1].hi == seq-1
	joinsNext := i < len(s.r) && s.r[i].lo == seq+1
	switch {
	case joinsPrev && joinsNext:
		s.r[i-1].hi = s.r[i].hi
		s.r = slices.Delete(s.r, i, i+1)
		return -1
	case joinsPrev:
		s.r[i-1].hi = seq
	case joinsNext:
		s.r[i].lo = seq
	default:
		s.r = slices.Insert(s.r, i, seqRange{seq, seq})
		return 1
	}
	return 0
}

// recover adds the events of a log's lines, read from r in order, and
// reports whether one of them is a session.ended. A line that is not an
// event (a file someone else wrote to) is passed over; an unterminated
// last line is not read.
func (d *dedup) recover(r io.Reader) (ended bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: read it whole.
			rest, restErr := br.ReadBytes('\n')
			line, err = append(bytes.Clone(line), rest...), restErr
		}
		if errors.Is(err, io.EOF) {
			return ended, nil
		}
		if err != nil {
			return ended, err
		}
		var ev struct {
			Source string `json:"source"`
			ID     string `json:"id"`
			Type   string `json:"type"`
			Seq    *int64 `json:"seq"`
			Epoch  int64  `json:"epoch"`
		}
		if json.Unmarshal(line, &ev) == nil && ev.ID != "" {
			d.add(eventKey{source: ev.Source, id: ev.ID, epoch: ev.Epoch, seq: ev.Seq})
			ended = ended || ev.Type == sessionEnded
		}
	}
}
