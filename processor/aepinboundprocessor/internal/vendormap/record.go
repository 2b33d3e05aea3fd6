package vendormap

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// Record is one vendor LogRecord with its resource, values in decoded-JSON
// form (string, bool, json.Number, []any, map[string]any, nil), which is
// what AEP data carries.
type Record struct {
	Resource   map[string]any
	Attributes map[string]any
	// EventName is the LogRecord's own event_name field (OTLP 1.5); the
	// vendors read so far put the name in the event.name attribute instead.
	EventName string
	// Timestamp and Observed are the record's time fields; zero when unset.
	Timestamp, Observed time.Time
}

// FromLogRecord reads lr and its resource. The body is not read: both
// vendors put a human summary there ("copilot_chat.tool.call: readFile"),
// never a fact the mapping needs, and it may hold content.
func FromLogRecord(res pcommon.Resource, lr plog.LogRecord) Record {
	rec := Record{
		Resource:   mapValue(res.Attributes()),
		Attributes: mapValue(lr.Attributes()),
		EventName:  lr.EventName(),
	}
	if ts := lr.Timestamp(); ts != 0 {
		rec.Timestamp = ts.AsTime()
	}
	if ts := lr.ObservedTimestamp(); ts != 0 {
		rec.Observed = ts.AsTime()
	}
	return rec
}

// Time is the record's event time: its Timestamp, else its
// ObservedTimestamp, else Codex's event.timestamp attribute (Codex's
// tracing bridge may leave both fields unset). ok is false when none is
// there, and the caller supplies the time it saw the record.
func (r Record) Time() (t time.Time, ok bool) {
	switch {
	case !r.Timestamp.IsZero():
		return r.Timestamp, true
	case !r.Observed.IsZero():
		return r.Observed, true
	}
	if s, isStr := r.Attributes[attrEventTimestamp].(string); isStr {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// name is the record's event name: the event.name attribute, else the
// event_name field.
func (r Record) name() string {
	if s, ok := r.Attributes[attrEventName].(string); ok && s != "" {
		return s
	}
	return r.EventName
}

func mapValue(m pcommon.Map) map[string]any {
	out := make(map[string]any, m.Len())
	for k, v := range m.All() {
		out[k] = value(v)
	}
	return out
}

// value converts an AnyValue to decoded-JSON form. Doubles that JSON
// cannot hold (NaN, ±Inf) ride as their text, bytes as base64, as the
// OTLP/JSON encoding writes them.
func value(v pcommon.Value) any {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str()
	case pcommon.ValueTypeBool:
		return v.Bool()
	case pcommon.ValueTypeInt:
		return json.Number(strconv.FormatInt(v.Int(), 10))
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	case pcommon.ValueTypeBytes:
		return base64.StdEncoding.EncodeToString(v.Bytes().AsRaw())
	case pcommon.ValueTypeMap:
		return mapValue(v.Map())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		out := make([]any, 0, s.Len())
		for _, x := range s.All() {
			out = append(out, value(x))
		}
		return out
	default:
		return nil
	}
}
