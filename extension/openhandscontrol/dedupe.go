package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"

import "container/list"

// dedupeCapacity bounds the commands remembered after their decision (the
// README documents it). A command's recorded ack lives exactly as long as
// its dedupe entry (AEP-0004 §3); once forgotten, a redelivery is a new
// command, whose guards then refuse it if its moment has passed.
const dedupeCapacity = 10_000

// commandKey is the AEP-0004 idempotency key.
type commandKey struct{ source, id string }

// entry is one remembered command: in flight until its decision is
// recorded.
type entry struct {
	decision decision
	session  Session
	decided  *list.Element // position among the decided, nil while in flight
}

// dedupe remembers commands by (source, id). In-flight entries are bounded
// by the worker limit, decided ones by dedupeCapacity (oldest forgotten
// first). It is not safe for concurrent use; the gate locks it.
type dedupe struct {
	entries  map[commandKey]*entry
	decided  *list.List // of commandKey, oldest first
	capacity int
}

func newDedupe(capacity int) *dedupe {
	return &dedupe{entries: make(map[commandKey]*entry), decided: list.New(), capacity: capacity}
}

// admit records k as in flight and reports true, or returns the entry a
// redelivery finds.
func (d *dedupe) admit(k commandKey) (*entry, bool) {
	if e, ok := d.entries[k]; ok {
		return e, false
	}
	d.entries[k] = &entry{}
	return nil, true
}

// record stores k's decision and the session it was sequenced in, the
// first time; it reports whether this was the first.
func (d *dedupe) record(k commandKey, dec decision, s Session) bool {
	e, ok := d.entries[k]
	if !ok || e.decided != nil {
		return false
	}
	e.decision, e.session = dec, s
	e.decided = d.decided.PushBack(k)
	for d.decided.Len() > d.capacity {
		oldest := d.decided.Remove(d.decided.Front()).(commandKey)
		delete(d.entries, oldest)
	}
	return true
}

// forget drops an in-flight k that got no ack (it could not be
// sequenced), so that a redelivery is tried afresh.
func (d *dedupe) forget(k commandKey) {
	if e, ok := d.entries[k]; ok && e.decided == nil {
		delete(d.entries, k)
	}
}
