package aepreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
)

// retryAfterSeconds is the Retry-After of a 503: the pipeline refused
// for now (a memory limiter under pressure), so the sender waits a moment
// and resends the same events.
const retryAfterSeconds = 1

// handleEvents serves {base}/events: POST takes events, GET answers with
// the discovery document (AEP-0003 §3.4: the same URL).
func (r *aepReceiver) handleEvents(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPost {
		r.ingest(w, req)
		return
	}
	r.handleDiscovery(w, req)
}

func (r *aepReceiver) handleDiscovery(w http.ResponseWriter, req *http.Request) {
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if req.Method == http.MethodGet {
			_, _ = w.Write(r.discover)
		}
	default:
		allow := "GET, HEAD"
		if req.URL.Path == eventsPath {
			allow = "GET, HEAD, POST"
		}
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, "method-not-allowed", req.Method+" is not served here")
	}
}

// ingest is the HTTP POST binding (AEP-0003 §3.2). Every event of the
// body is checked before any is passed on; the body is taken whole (202)
// or refused whole.
func (r *aepReceiver) ingest(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	if !acceptsVersion(req.Header.Values("AEP-Version")) {
		r.tel.requestRefusedFor(ctx, requestVersion)
		writeJSON(w, http.StatusUpgradeRequired, map[string][]string{"versions": {aep.Version}})
		return
	}
	batch, ok := isBatch(req.Header.Get("Content-Type"))
	if !ok {
		r.tel.requestRefusedFor(ctx, requestContentType)
		writeError(w, http.StatusUnsupportedMediaType, "unsupported-media-type",
			"Content-Type must be application/json (one event) or application/x-ndjson (a batch)")
		return
	}
	body, refusal := r.readBody(req, batch)
	if refusal != "" {
		r.refuseBody(ctx, w, refusal)
		return
	}
	lines := [][]byte{body}
	if batch {
		lines = splitLines(body)
	}
	if len(lines) > r.cfg.MaxBatchEvents {
		r.refuseBody(ctx, w, requestTooManyEvents)
		return
	}
	if len(lines) == 0 {
		r.tel.eventsRefused(ctx, reasonInvalid, 1)
		writeError(w, http.StatusBadRequest, "invalid-event", "the body holds no event")
		return
	}

	conv := r.convert(ctx, lines)
	if conv.refused != nil {
		r.refuseEvents(w, conv.refused, batch)
		return
	}
	n, err := r.handOff(ctx, r.obsrecv, conv.records)
	switch {
	case err == nil:
		w.WriteHeader(http.StatusAccepted)
	case consumererror.IsPermanent(err):
		// As the otlp receiver answers a permanent error: the sender must
		// not resend what can never be taken.
		r.rl.Error(reasonPipeline, "the pipeline permanently refused AEP events; the sender was told (HTTP 400)",
			zap.Int("events", n), zap.Error(err))
		writeError(w, http.StatusBadRequest, "pipeline-refused", "the collector's pipeline refused the events for good")
	default:
		r.rl.Warn(reasonBackpressure, "the pipeline refused AEP events for now; the sender was told to retry (HTTP 503)",
			zap.Int("events", n), zap.Error(err))
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the collector's pipeline is busy; retry the same events")
	}
}

// acceptsVersion reports whether the AEP-Version header names 0.1. A
// comma-separated list of versions is read as the sender offering each.
func acceptsVersion(values []string) bool {
	for _, v := range values {
		for offered := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(offered) == aep.Version {
				return true
			}
		}
	}
	return false
}

// isBatch reads the Content-Type: application/json is one event,
// application/x-ndjson a batch; ok is false for anything else.
func isBatch(contentType string) (batch, ok bool) {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false, false
	}
	switch mediaType {
	case "application/json":
		return false, true
	case "application/x-ndjson":
		return true, true
	}
	return false, false
}

// readChunk is how much of a body is read at a time.
const readChunk = 32 << 10

// readBody reads the body under max_request_body_size, answering a
// declared oversize body before reading it. A batch's newlines are counted
// as the body arrives and the body is refused as soon as they pass
// max_batch_events, so memory stays bounded by the body limit whatever the
// body holds. refusal is "" on success, else a requests_refused reason.
func (r *aepReceiver) readBody(req *http.Request, batch bool) (body []byte, refusal string) {
	if req.ContentLength > r.maxBody {
		return nil, requestTooLarge
	}
	// One byte past the limit tells an oversize body, whoever bounds the
	// reader; a declared length is read without growing the buffer.
	limit := r.maxBody + 1
	body = make([]byte, 0, min(max(req.ContentLength+1, readChunk), limit))
	newlines := 0
	for {
		if len(body) == cap(body) {
			body = append(make([]byte, 0, min(2*int64(cap(body)), limit)), body...)
		}
		n, err := req.Body.Read(body[len(body):cap(body)])
		if batch {
			newlines += bytes.Count(body[len(body):len(body)+n], []byte("\n"))
		}
		body = body[:len(body)+n]
		// k newlines make at least k lines (the last one's newline is
		// optional), so the batch is already too long.
		if newlines > r.cfg.MaxBatchEvents {
			return nil, requestTooManyEvents
		}
		switch _, tooLarge := errors.AsType[*http.MaxBytesError](err); {
		case tooLarge, int64(len(body)) > r.maxBody:
			return nil, requestTooLarge
		case errors.Is(err, io.EOF):
			return body, ""
		case err != nil:
			return nil, requestUnreadable
		}
	}
}

// refuseBody answers a request refused before its events were read.
func (r *aepReceiver) refuseBody(ctx context.Context, w http.ResponseWriter, reason string) {
	r.tel.requestRefusedFor(ctx, reason)
	switch reason {
	case requestTooLarge:
		writeError(w, http.StatusRequestEntityTooLarge, "payload-too-large",
			fmt.Sprintf("the body is larger than max_request_body_size (%d bytes); nothing was taken", r.maxBody))
	case requestTooManyEvents:
		writeError(w, http.StatusRequestEntityTooLarge, "too-many-events",
			fmt.Sprintf("the batch holds more than max_batch_events (%d) events; nothing was taken", r.cfg.MaxBatchEvents))
	default:
		writeError(w, http.StatusBadRequest, "unreadable-body", "the request body could not be read")
	}
}

// splitLines cuts an NDJSON body into its lines; the newline after the
// last one is optional. A blank line is kept, to be refused as an event.
func splitLines(body []byte) [][]byte {
	body = bytes.TrimSuffix(body, []byte("\n"))
	if len(body) == 0 {
		return nil
	}
	return bytes.Split(body, []byte("\n"))
}

// conversion is a body's events as log records, or why they are refused.
type conversion struct {
	records *recordBuilder
	// refused is the first refused event; nil when every event passed.
	refused *eventRefusal
	// refusedBy counts the refused events by reason.
	refusedBy map[string]int
}

// eventRefusal is why the event at index line was refused.
type eventRefusal struct {
	line   int
	reason string
	err    error
}

// convert checks every event and projects the accepted ones, in order. It
// goes on past a refused event so that every refused event is counted.
func (r *aepReceiver) convert(ctx context.Context, lines [][]byte) conversion {
	out := conversion{records: newRecordBuilder(), refusedBy: make(map[string]int)}
	valid := 0
	for i, raw := range lines {
		agent, lr, downlevelled, reason, err := r.project(raw)
		if err != nil {
			out.refusedBy[reason]++
			// A forbidden agent outranks an invalid event: the answer is
			// then 403, whatever else the body holds.
			if out.refused == nil || reason == reasonAgent && out.refused.reason != reasonAgent {
				out.refused = &eventRefusal{line: i, reason: reason, err: err}
			}
			continue
		}
		valid++
		out.records.add(agent, lr, downlevelled)
	}
	if out.refused != nil {
		out.refusedBy[reasonBatch] = valid
		for reason, n := range out.refusedBy {
			r.tel.eventsRefused(ctx, reason, n)
		}
	}
	return out
}

// project admits one event and projects it, down-levelled to its ceiling,
// to a log record.
func (r *aepReceiver) project(raw []byte) (agent string, lr plog.LogRecord, downlevelled bool, reason string, err error) {
	ev, reason, err := admit(raw)
	if err != nil {
		return "", lr, false, reason, err
	}
	if len(r.cfg.Agents) > 0 && !slices.Contains(r.cfg.Agents, ev.Agent) {
		return "", lr, false, reasonAgent, fmt.Errorf("agent %q is not one of the receiver's agents", truncate(ev.Agent))
	}
	passed := capture.Downlevel(ev, r.cfg.Capture.ceiling(ev.Type))
	lr = plog.NewLogRecord()
	if err := projection.ToLogRecord(passed, lr, projection.Options{}); err != nil {
		return "", lr, false, reasonInvalid, err
	}
	return ev.Agent, lr, passed != ev, "", nil
}

// truncate bounds a sender's string quoted back to it.
func truncate(s string) string {
	const maxQuoted = 64
	if len(s) <= maxQuoted {
		return s
	}
	return s[:maxQuoted] + "…"
}

// admit decodes and checks one event: envelope and payload schema, no
// command, data within its declared capture.
func admit(raw []byte) (*aep.Event, string, error) {
	v, err := aep.DecodeValue(raw)
	if err != nil {
		return nil, reasonInvalid, fmt.Errorf("not one JSON value: %w", err)
	}
	if err := schema.ValidateValue(v); err != nil {
		return nil, reasonInvalid, err
	}
	ev, err := aep.EventOf(v)
	if err != nil {
		return nil, reasonInvalid, err
	}
	if aep.IsCommand(ev.Type) {
		return nil, reasonCommand, fmt.Errorf("%s is a control command: commands ride authenticated duplex bindings only (AEP-0004 §4.1), never this one", ev.Type)
	}
	if err := capture.CheckHonest(ev); err != nil {
		return nil, reasonCapture, err
	}
	return ev, "", nil
}

// refuseEvents answers a body refused for one of its events: 403 for an
// agent outside agents, else 400 invalid-event. A batch's answer names
// the event's 0-based index as "line", as the aeprelay exporter reads it.
func (r *aepReceiver) refuseEvents(w http.ResponseWriter, ref *eventRefusal, batch bool) {
	status, code := http.StatusBadRequest, "invalid-event"
	if ref.reason == reasonAgent {
		status, code = http.StatusForbidden, "forbidden"
	}
	r.rl.Warn("refused:"+ref.reason, "AEP events refused to the sender; nothing was taken",
		zap.Int("status", status), zap.String("reason", ref.reason), zap.Int("line", ref.line), zap.Error(ref.err))
	body := map[string]any{"error": code, "detail": ref.err.Error()}
	if batch {
		body["detail"] = fmt.Sprintf("line %d: %s; nothing was taken", ref.line, ref.err)
		body["line"] = ref.line
	}
	writeJSON(w, status, body)
}

// recordBuilder gathers log records in order, one ResourceLogs per run of
// events from the same agent (resource service.name = agent, as the
// openhands receiver sets it).
type recordBuilder struct {
	logs plog.Logs
	// downlevelled counts the records passed on down-levelled.
	downlevelled int
	agent        string
	records      plog.LogRecordSlice
	started      bool
	observed     pcommon.Timestamp
}

func newRecordBuilder() *recordBuilder {
	return &recordBuilder{logs: plog.NewLogs(), observed: pcommon.NewTimestampFromTime(time.Now())}
}

func (b *recordBuilder) add(agent string, lr plog.LogRecord, downlevelled bool) {
	if downlevelled {
		b.downlevelled++
	}
	if !b.started || agent != b.agent {
		rl := b.logs.ResourceLogs().AppendEmpty()
		projection.SetResource(rl.Resource(), agent)
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(scopeName)
		b.agent, b.records, b.started = agent, sl.LogRecords(), true
	}
	lr.SetObservedTimestamp(b.observed)
	lr.MoveTo(b.records.AppendEmpty())
}

// handOff passes b's records to the pipeline, reported under obsrecv,
// and counts them: accepted, or refused for pipeline (a permanent error)
// or backpressure. It returns how many records it passed; the caller
// answers the error.
func (r *aepReceiver) handOff(ctx context.Context, obsrecv *receiverhelper.ObsReport, b *recordBuilder) (int, error) {
	n := b.logs.LogRecordCount()
	opCtx := obsrecv.StartLogsOp(ctx)
	err := r.next.ConsumeLogs(opCtx, b.logs)
	obsrecv.EndLogsOp(opCtx, "aep", n, err)
	switch {
	case err == nil:
		r.tel.accepted.Add(ctx, int64(n))
		r.tel.downlevelled.Add(ctx, int64(b.downlevelled))
	case consumererror.IsPermanent(err):
		r.tel.eventsRefused(ctx, reasonPipeline, n)
	default:
		r.tel.eventsRefused(ctx, reasonBackpressure, n)
	}
	return n, err
}

// discoveryDocument is the AEP-0003 §3.4 discovery object, advertising
// only what this receiver does: the events endpoint, the capture levels
// it passes on, and no commands.
func discoveryDocument(c CaptureConfig) ([]byte, error) {
	var levels []aep.Capture
	for _, level := range []aep.Capture{aep.CaptureNone, aep.CaptureMetadata, aep.CaptureRedacted, aep.CaptureFull} {
		if c.highest().Allows(level) {
			levels = append(levels, level)
		}
	}
	doc := map[string]any{
		"aep":       []string{aep.Version},
		"role":      "collector",
		"endpoints": map[string]string{"events": eventsPath},
		"capabilities": map[string]any{
			"capture": levels,
			"control": map[string][]string{"accepts": {}},
		},
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("aep receiver: discovery document: %w", err)
	}
	return raw, nil
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	raw, err := json.Marshal(body)
	if err != nil {
		status, raw = http.StatusInternalServerError, []byte(`{"error":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}

func writeError(w http.ResponseWriter, status int, code, detail string) {
	writeJSON(w, status, map[string]string{"error": code, "detail": detail})
}

// writeServerError answers what confighttp refuses before the handler
// (failed authentication, an undecodable Content-Encoding) in the same
// JSON shape as the binding's own errors.
func writeServerError(w http.ResponseWriter, _ *http.Request, msg string, status int) {
	code := strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "-")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	writeError(w, status, code, msg)
}
