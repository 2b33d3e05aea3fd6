package projection

import (
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// ErrNotAEP is wrapped by FromLogRecord for records whose event_name does
// not start with EventNamePrefix: they are not AEP events, and no event is
// guessed from them.
var ErrNotAEP = errors.New("projection: log record is not an AEP event")

// FromLogRecord rebuilds the event that ToLogRecord projected onto lr. The
// resource is not consulted: service.name may be overridden for a shared
// relay, so the agent comes from aep.agent_id alone.
func FromLogRecord(lr plog.LogRecord, _ pcommon.Resource) (*aep.Event, error) {
	ev := new(aep.Event)
	if err := FromLogRecordInto(lr, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// FromLogRecordInto is FromLogRecord writing the event into ev, which it
// overwrites (and leaves as it was when it fails): a caller that needs
// the event only for a moment can keep it on its stack.
func FromLogRecordInto(lr plog.LogRecord, ev *aep.Event) error {
	typ, ok := TypeOf(lr)
	if !ok {
		return fmt.Errorf("%w: event_name %q lacks the %q prefix", ErrNotAEP, lr.EventName(), EventNamePrefix)
	}
	return rebuildEvent(typ, lr, ev)
}

// TypeOf is the AEP type lr's event_name names, and whether lr is an AEP
// record at all (its event_name starts with EventNamePrefix). It reads
// nothing else: a record can be classified before it is rebuilt.
func TypeOf(lr plog.LogRecord) (string, bool) {
	return strings.CutPrefix(lr.EventName(), EventNamePrefix)
}

// recordFacts collects what the attributes say before it is checked. It
// stays on the stack: the event is copied out once it is whole.
type recordFacts struct {
	ev                 aep.Event
	capture            string
	data               map[string]any
	wireTime           string
	traceparentVersion string
	wireData           string
	severityDefaulted  bool
	captureDefaulted   bool
}

// rebuildEvent rebuilds the event of type typ from lr into ev.
func rebuildEvent(typ string, lr plog.LogRecord, ev *aep.Event) error {
	if err := readRecord(typ, lr, ev); err != nil {
		return fmt.Errorf("projection: %s record: %w", lr.EventName(), err)
	}
	return nil
}

func readRecord(typ string, lr plog.LogRecord, ev *aep.Event) error {
	if typ == "" {
		return errors.New("event_name has no AEP type after the prefix")
	}
	f := recordFacts{ev: aep.Event{AEP: aep.Version, Type: typ}}
	for key, v := range lr.Attributes().All() {
		if err := f.readAttribute(key, v); err != nil {
			return fmt.Errorf("attribute %s: %w", key, err)
		}
	}
	for _, req := range [...]struct{ key, value string }{
		{AttrAgentID, f.ev.Agent}, {AttrEventID, f.ev.ID}, {AttrCapture, f.capture},
		{AttrSource, f.ev.Source}, {WireVersion, f.ev.AEP},
	} {
		if req.value == "" {
			return fmt.Errorf("required attribute %s is missing or empty", req.key)
		}
	}
	if err := f.readCapture(); err != nil {
		return err
	}
	if err := f.readSeverity(lr); err != nil {
		return err
	}
	if err := f.readTime(lr); err != nil {
		return err
	}
	if err := f.readTraceparent(lr); err != nil {
		return err
	}
	if err := f.readData(lr.Body()); err != nil {
		return err
	}
	*ev = f.ev
	return nil
}

func (f *recordFacts) readAttribute(key string, v pcommon.Value) error {
	var err error
	switch key {
	case AttrAgentID:
		f.ev.Agent, err = strValue(v)
	case AttrEventID:
		f.ev.ID, err = strValue(v)
	case AttrCapture:
		f.capture, err = strValue(v)
	case AttrSource:
		f.ev.Source, err = strValue(v)
	case AttrSessionID:
		f.ev.Session, err = strValue(v)
	case AttrRunID:
		f.ev.Run, err = strValue(v)
	case AttrStep:
		f.ev.Step, err = strValue(v)
	case AttrCausationID:
		f.ev.Cause, err = strValue(v)
	case AttrSubject:
		f.ev.Subject, err = strValue(v)
	case AttrSequence:
		f.ev.Seq, err = intValue(v)
	case AttrEpoch:
		f.ev.Epoch, err = intValue(v)
	case WireVersion:
		f.ev.AEP, err = strValue(v)
	case WireTime:
		f.wireTime, err = strValue(v)
	case WireTraceparentVersion:
		f.traceparentVersion, err = strValue(v)
	case WireData:
		f.wireData, err = strValue(v)
	case WireSeverityDefaulted:
		f.severityDefaulted, err = trueValue(v)
	case WireCaptureDefaulted:
		f.captureDefaulted, err = trueValue(v)
	default:
		switch {
		case strings.HasPrefix(key, GenAIPrefix):
			var raw any
			if raw, err = rawValue(v); err == nil {
				f.dataMap()[key] = raw
			}
		case strings.HasPrefix(key, WireExtensionPrefix):
			err = f.readExtension(strings.TrimPrefix(key, WireExtensionPrefix), v)
		case IsWireAttribute(key):
			err = errors.New("unknown lossless extra (written by a newer projection?)")
		}
		// Any other attribute was added outside the projection: not AEP's.
	}
	return err
}

func (f *recordFacts) dataMap() map[string]any {
	if f.data == nil {
		f.data = make(map[string]any)
	}
	return f.data
}

func (f *recordFacts) readExtension(name string, v pcommon.Value) error {
	var value any
	switch v.Type() {
	case pcommon.ValueTypeStr:
		value = v.Str()
	case pcommon.ValueTypeInt:
		value = v.Int()
	case pcommon.ValueTypeBool:
		value = v.Bool()
	default:
		return fmt.Errorf("extension value is %s, not a string, int or bool", v.Type())
	}
	return f.ev.SetExtension(name, value)
}

func (f *recordFacts) readCapture() error {
	capture := aep.Capture(f.capture)
	if capture.Rank() < 0 {
		return fmt.Errorf("%s %q is not a capture level", AttrCapture, f.capture)
	}
	if !f.captureDefaulted {
		f.ev.Capture = capture
		return nil
	}
	if capture != aep.CaptureMetadata {
		return fmt.Errorf("%s is set but %s is %q, not the materialized default", WireCaptureDefaulted, AttrCapture, f.capture)
	}
	return nil
}

// readSeverity buckets severity_number (AEP-0005 §3.4), falling back to an
// exact severity_text for records without a number; a record with neither
// states no severity.
func (f *recordFacts) readSeverity(lr plog.LogRecord) error {
	number, text := lr.SeverityNumber(), lr.SeverityText()
	sev, ok := severityFromNumber(number)
	switch {
	case number != plog.SeverityNumberUnspecified && !ok:
		return fmt.Errorf("severity_number %d is outside 1–24", number)
	case !ok:
		sev, _ = severityFromText(text)
	}
	if !f.severityDefaulted {
		f.ev.Severity = sev
		return nil
	}
	if sev != aep.SeverityInfo {
		return fmt.Errorf("%s is set but the record's severity is %q, not the materialized info", WireSeverityDefaulted, sev)
	}
	return nil
}

func (f *recordFacts) readTime(lr plog.LogRecord) error {
	ns := uint64(lr.Timestamp())
	if f.wireTime == "" {
		if ns == 0 {
			return errors.New("time_unix_nano is unset")
		}
		var text [maxDefaultTimeLen]byte
		f.ev.Time = string(appendDefaultTime(text[:0], ns))
		return nil
	}
	projected, err := timeToUnixNano(f.wireTime)
	if err != nil {
		return fmt.Errorf("%s: %w", WireTime, err)
	}
	if projected != ns {
		return fmt.Errorf("%s %q projects to %d, but time_unix_nano is %d", WireTime, f.wireTime, projected, ns)
	}
	f.ev.Time = f.wireTime
	return nil
}

func (f *recordFacts) readTraceparent(lr plog.LogRecord) error {
	tc := traceContext{version: "00", traceID: lr.TraceID(), spanID: lr.SpanID()}
	if f.traceparentVersion != "" {
		if len(f.traceparentVersion) != 2 || !isLowerHex(f.traceparentVersion) {
			return fmt.Errorf("%s %q is not two lowercase hex digits", WireTraceparentVersion, f.traceparentVersion)
		}
		tc.version = f.traceparentVersion
	} else if tc.traceID.IsEmpty() {
		return nil // No trace context.
	}
	flags := lr.Flags()
	if flags > 0xff {
		return fmt.Errorf("flags %#x do not fit the W3C trace-flags byte", uint32(flags))
	}
	tc.flags = byte(flags)
	f.ev.Traceparent = tc.String()
	return nil
}

func (f *recordFacts) readData(body pcommon.Value) error {
	switch body.Type() {
	case pcommon.ValueTypeEmpty:
	case pcommon.ValueTypeMap:
		data := f.dataMap()
		for k, v := range body.Map().All() {
			if _, dup := data[k]; dup {
				return fmt.Errorf("body key %q is also an attribute", k)
			}
			raw, err := rawValue(v)
			if err != nil {
				return fmt.Errorf("body %q: %w", k, err)
			}
			data[k] = raw
		}
	default:
		return fmt.Errorf("body is %s, not a map", body.Type())
	}
	switch f.wireData {
	case "":
		f.ev.Data = f.data
		return nil
	case WireDataEmpty, WireDataDropped:
		if f.data != nil {
			return fmt.Errorf("%s is %q, but the record carries data", WireData, f.wireData)
		}
		if f.wireData == WireDataEmpty {
			f.ev.Data = map[string]any{}
		}
		return nil
	default:
		return fmt.Errorf("%s %q is neither %q nor %q", WireData, f.wireData, WireDataEmpty, WireDataDropped)
	}
}

func strValue(v pcommon.Value) (string, error) {
	if v.Type() != pcommon.ValueTypeStr {
		return "", fmt.Errorf("is %s, not a string", v.Type())
	}
	return v.Str(), nil
}

func intValue(v pcommon.Value) (*int64, error) {
	if v.Type() != pcommon.ValueTypeInt {
		return nil, fmt.Errorf("is %s, not an int", v.Type())
	}
	return aep.Int64(v.Int()), nil
}

func trueValue(v pcommon.Value) (bool, error) {
	if v.Type() != pcommon.ValueTypeBool || !v.Bool() {
		return false, fmt.Errorf("is %s %s, not bool true", v.Type(), v.AsString())
	}
	return true, nil
}
