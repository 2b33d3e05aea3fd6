package projection

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// Options tune the forward projection.
type Options struct {
	// MaxCapture is the exporter's max_capture: an event whose capture (or
	// the metadata default) ranks above it is exported without its payload.
	// The zero value disables the gate.
	MaxCapture aep.Capture
}

// SetResource sets the resource attribute the projection derives from the
// agent (service.name). A shared relay may pass another name: the inverse
// reads the agent from aep.agent_id only.
func SetResource(res pcommon.Resource, agent string) {
	res.Attributes().PutStr(AttrServiceName, agent)
}

// ToLogRecord projects ev onto lr, replacing lr's timestamp, event name,
// severity, trace context, attributes and body. ObservedTimestamp is left to
// the caller. ev is not modified. On error lr may be partly written and
// should be discarded.
func ToLogRecord(ev *aep.Event, lr plog.LogRecord, opts Options) error {
	if err := projectLogRecord(ev, lr, opts); err != nil {
		return fmt.Errorf("projection: event %q of type %q: %w", ev.ID, ev.Type, err)
	}
	return nil
}

func projectLogRecord(ev *aep.Event, lr plog.LogRecord, opts Options) error {
	for _, req := range [...]struct{ name, value string }{
		{"aep", ev.AEP}, {"id", ev.ID}, {"type", ev.Type}, {"time", ev.Time},
		{"source", ev.Source}, {"agent", ev.Agent},
	} {
		if req.value == "" {
			return fmt.Errorf("required attribute %q is absent", req.name)
		}
	}
	if opts.MaxCapture != "" && opts.MaxCapture.Rank() < 0 {
		return fmt.Errorf("max capture %q is not a capture level", opts.MaxCapture)
	}
	capture := ev.EffectiveCapture()
	if capture.Rank() < 0 {
		return fmt.Errorf("capture %q is not a capture level", ev.Capture)
	}
	level, ok := severityLevels[ev.EffectiveSeverity()]
	if !ok {
		return fmt.Errorf("severity %q is not a severity level", ev.Severity)
	}
	ns, err := timeToUnixNano(ev.Time)
	if err != nil {
		return err
	}
	var tc traceContext
	if ev.Traceparent != "" {
		if tc, err = parseTraceparent(ev.Traceparent); err != nil {
			return err
		}
	}

	lr.SetTimestamp(pcommon.Timestamp(ns))
	lr.SetEventName(eventName(ev.Type))
	lr.SetSeverityText(level.text)
	lr.SetSeverityNumber(level.number)
	lr.SetTraceID(tc.traceID)
	lr.SetSpanID(tc.spanID)
	lr.SetFlags(plog.LogRecordFlags(tc.flags))

	gated := opts.MaxCapture != "" && capture.Rank() > opts.MaxCapture.Rank()
	attrs := lr.Attributes()
	attrs.Clear()
	// Room for the standard attributes and the usual extras, the
	// extensions and the hoisted gen_ai.* keys: the attributes are not
	// grown as they are put.
	hoisted := 0
	if !gated {
		hoisted = countGenAIKeys(ev.Data)
	}
	attrs.EnsureCapacity(12 + len(ev.Extensions) + hoisted)
	attrs.PutStr(AttrAgentID, ev.Agent)
	attrs.PutStr(AttrEventID, ev.ID)
	attrs.PutStr(AttrCapture, string(capture))
	attrs.PutStr(AttrSource, ev.Source)
	putStrIfPresent(attrs, AttrSessionID, ev.Session)
	putStrIfPresent(attrs, AttrRunID, ev.Run)
	putStrIfPresent(attrs, AttrStep, ev.Step)
	if ev.Seq != nil {
		attrs.PutInt(AttrSequence, *ev.Seq)
	}
	if ev.Epoch != nil {
		attrs.PutInt(AttrEpoch, *ev.Epoch)
	}
	putStrIfPresent(attrs, AttrCausationID, ev.Cause)
	putStrIfPresent(attrs, AttrSubject, ev.Subject)

	if err := putData(lr, ev.Data, gated); err != nil {
		return err
	}

	// Lossless extras, each only when the standard fields cannot say it.
	attrs.PutStr(WireVersion, ev.AEP)
	var timeText [maxDefaultTimeLen]byte
	if ns == 0 || string(appendDefaultTime(timeText[:0], ns)) != ev.Time {
		attrs.PutStr(WireTime, ev.Time)
	}
	if ev.Traceparent != "" && (tc.version != "00" || tc.traceID.IsEmpty()) {
		attrs.PutStr(WireTraceparentVersion, tc.version)
	}
	if ev.Severity == "" {
		attrs.PutBool(WireSeverityDefaulted, true)
	}
	if ev.Capture == "" {
		attrs.PutBool(WireCaptureDefaulted, true)
	}
	var names [smallMap]string
	for _, name := range appendSortedKeys(names[:0], ev.Extensions) {
		if err := putExtension(attrs, name, ev.Extensions[name]); err != nil {
			return err
		}
	}
	return nil
}

func putStrIfPresent(attrs pcommon.Map, key, value string) {
	if value != "" {
		attrs.PutStr(key, value)
	}
}

// putData applies the mirror rule (top-level gen_ai.* keys to attributes,
// the rest to the body map) unless the capture gate drops the payload, and
// records in WireData what an absent body cannot tell apart.
func putData(lr plog.LogRecord, data map[string]any, gated bool) error {
	pcommon.NewValueEmpty().MoveTo(lr.Body())
	switch {
	case data == nil:
		return nil
	case len(data) == 0:
		lr.Attributes().PutStr(WireData, WireDataEmpty)
		return nil
	case gated:
		lr.Attributes().PutStr(WireData, WireDataDropped)
		return nil
	}
	var keyBuf [smallMap]string
	keys := appendSortedKeys(keyBuf[:0], data)
	bodyKeys := len(keys) - countGenAIKeys(data)
	attrs := lr.Attributes()
	var body pcommon.Map // unset, and unused, when every key is gen_ai.*
	if bodyKeys > 0 {
		body = lr.Body().SetEmptyMap()
		body.EnsureCapacity(bodyKeys)
	}
	for _, k := range keys {
		dst := body
		if strings.HasPrefix(k, GenAIPrefix) {
			dst = attrs
		}
		if err := putValue(dst.PutEmpty(k), data[k]); err != nil {
			return fmt.Errorf("data %q: %w", k, err)
		}
	}
	return nil
}

// countGenAIKeys is how many of data's top-level keys putData hoists to
// attributes when the gate keeps the payload.
func countGenAIKeys(data map[string]any) int {
	n := 0
	for k := range data {
		if strings.HasPrefix(k, GenAIPrefix) {
			n++
		}
	}
	return n
}

func putExtension(attrs pcommon.Map, name string, value any) error {
	if err := aep.CheckExtension(name, value); err != nil {
		return err
	}
	key := WireExtensionPrefix + name
	switch v := value.(type) {
	case string:
		attrs.PutStr(key, v)
	case bool:
		attrs.PutBool(key, v)
	default:
		// CheckExtension admitted an integer of some Go kind.
		return putValue(attrs.PutEmpty(key), v)
	}
	return nil
}
