package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// maxResponseBytes bounds how much of a relay answer is read.
const maxResponseBytes = 64 << 10

// httpTransport is the HTTP POST binding (AEP-0003 §3.2): NDJSON batches to
// {endpoint}/events. It cannot receive commands.
type httpTransport struct {
	cfg      *Config
	settings component.TelemetrySettings
	tel      *telemetry
	status   *statusReporter
	// drop reports an event the relay refused on its own.
	drop    func(context.Context, refusal)
	target  string
	display string

	client *http.Client // set by start
}

func newHTTPTransport(cfg *Config, settings component.TelemetrySettings, tel *telemetry, status *statusReporter, drop func(context.Context, refusal)) (*httpTransport, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/events"
	u.RawPath = ""
	return &httpTransport{
		cfg: cfg, settings: settings, tel: tel, status: status, drop: drop,
		target: u.String(), display: redactURL(u),
	}, nil
}

func (h *httpTransport) start(ctx context.Context, host component.Host) error {
	clientCfg := h.cfg.ClientConfig
	// exporterhelper's per-attempt timeout bounds each push, splits and
	// all; the client must not cut a split short on its own clock.
	clientCfg.Timeout = 0
	client, err := clientCfg.ToClient(ctx, host.GetExtensions(), h.settings)
	if err != nil {
		return fmt.Errorf("build the HTTP client: %w", err)
	}
	h.client = client
	return nil
}

func (h *httpTransport) shutdown(context.Context) error {
	if h.client != nil {
		h.client.CloseIdleConnections()
	}
	return nil
}

// send posts the events in order. A retryable failure after part of them
// was settled is an *unsentError naming what is still to go.
func (h *httpTransport) send(ctx context.Context, src *pushSource) error {
	events := src.all().events
	settled, err := h.deliver(ctx, events)
	switch {
	case err == nil:
		h.status.ok()
		return nil
	case consumererror.IsPermanent(err):
		h.status.permanentError(err)
		return err
	}
	h.status.recoverable(err)
	h.status.credentialsRefused(ctx, err)
	if settled > 0 {
		return &unsentError{err: err, pending: events[settled:]}
	}
	return err
}

// unsentError is a retryable failure after part of a push was settled
// (accepted, or dropped as unsendable): only pending still has to go.
type unsentError struct {
	err     error
	pending []outboundEvent
}

func (e *unsentError) Error() string { return e.err.Error() }
func (e *unsentError) Unwrap() error { return e.err }

// deliver posts events in order and returns how many of them are settled
// before the first failure. 413 splits the batch. 400 (AEP-0003: the batch
// is refused whole, naming its first failing line) and 207 (a per-line
// report, whose shape AEP 0.1 leaves open) isolate the event the relay
// names, or bisect, so that one refused event is dropped and the rest go
// on; resending what a 207 accepted is safe, as the relay dedupes on
// (source, id). A 207 for one event refuses it only if its body names an
// error.
func (h *httpTransport) deliver(ctx context.Context, events []outboundEvent) (int, error) {
	resp, err := h.post(ctx, events)
	if err != nil {
		return 0, err
	}
	switch {
	case resp.code == http.StatusMultiStatus && len(events) == 1 && resp.body.Error == "":
		// A per-line report for one line that names no error accepted it.
		h.tel.sent(ctx, 1)
		return 1, nil
	case resp.code == http.StatusMultiStatus || resp.code == http.StatusBadRequest:
		if len(events) == 1 {
			h.drop(ctx, resp.refusal(events[0], reasonRelayRefused))
			return 1, nil
		}
		if line := resp.body.Line; line != nil && *line >= 0 && *line < len(events) {
			// The hint only isolates the event: it is dropped once the
			// relay refuses it alone, so a misread hint drops nothing.
			return h.deliverParts(ctx, events, *line, *line+1)
		}
		return h.deliverParts(ctx, events, len(events)/2)
	case resp.code >= 200 && resp.code < 300:
		h.tel.sent(ctx, len(events))
		return len(events), nil
	case resp.code == http.StatusRequestEntityTooLarge:
		if len(events) == 1 {
			h.drop(ctx, resp.refusal(events[0], reasonTooLarge))
			return 1, nil
		}
		return h.deliverParts(ctx, events, len(events)/2)
	}
	return 0, resp.failure(h.display)
}

// deliverParts delivers events cut at the given ascending indices, part
// after part, stopping at the first failure.
func (h *httpTransport) deliverParts(ctx context.Context, events []outboundEvent, cuts ...int) (int, error) {
	settled, start := 0, 0
	for _, end := range append(cuts, len(events)) {
		if end <= start {
			continue
		}
		n, err := h.deliver(ctx, events[start:end])
		settled += n
		if err != nil {
			return settled, err
		}
		start = end
	}
	return settled, nil
}

// relayResponse is the part of a relay answer the exporter acts on.
type relayResponse struct {
	code       int
	retryAfter string
	body       struct {
		Error    string          `json:"error"`
		Detail   json.RawMessage `json:"detail"`
		Line     *int            `json:"line"`
		Versions []string        `json:"versions"`
	}
}

func (h *httpTransport) post(ctx context.Context, events []outboundEvent) (relayResponse, error) {
	size := 0
	for _, ev := range events {
		size += len(ev.raw) + 1
	}
	body := bytes.NewBuffer(make([]byte, 0, size))
	for _, ev := range events {
		body.Write(ev.raw)
		body.WriteByte('\n')
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.target, body)
	if err != nil {
		return relayResponse{}, consumererror.NewPermanent(fmt.Errorf("build the POST to %s: %w", h.display, err))
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("AEP-Version", aep.Version)
	if h.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+string(h.cfg.Token))
	}
	start := time.Now()
	resp, err := h.client.Do(req)
	if err != nil {
		if urlErr, ok := errors.AsType[*url.Error](err); ok {
			urlErr.URL = h.display
		}
		return relayResponse{}, fmt.Errorf("POST %d events to the AEP relay: %w", len(events), err)
	}
	defer resp.Body.Close()
	out := relayResponse{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	_ = json.Unmarshal(raw, &out.body) // the body is optional; an odd one leaves the hints empty
	if out.code >= 200 && out.code < 300 && out.code != http.StatusMultiStatus {
		h.tel.confirmed(ctx, start)
	}
	return out, nil
}

func (r relayResponse) detail() string {
	var s string
	if json.Unmarshal(r.body.Detail, &s) == nil {
		return s
	}
	return string(r.body.Detail)
}

// refusal describes an event the relay refused on its own.
func (r relayResponse) refusal(ev outboundEvent, reason string) refusal {
	detail := r.detail()
	if detail == "" {
		detail = "HTTP " + strconv.Itoa(r.code)
	}
	return ev.refusedByRelay(reason, r.body.Error, detail)
}

// failure maps a status that refuses the whole batch to a permanent or a
// retryable error. Refused credentials are retryable, as on the socket.
func (r relayResponse) failure(relay string) error {
	switch r.code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return &credentialsError{relay: relay, code: r.code}
	case http.StatusUnsupportedMediaType:
		return consumererror.NewPermanent(fmt.Errorf("AEP relay %s refused Content-Type application/x-ndjson (HTTP 415)", relay))
	case http.StatusUpgradeRequired:
		return consumererror.NewPermanent(fmt.Errorf("AEP relay %s does not speak AEP %s (HTTP 426; it supports %v)", relay, aep.Version, r.body.Versions))
	}
	err := fmt.Errorf("AEP relay %s answered HTTP %d: %s %s", relay, r.code, r.body.Error, r.detail())
	if r.code != http.StatusTooManyRequests && r.code < 500 {
		return consumererror.NewPermanent(err)
	}
	if delay, ok := parseRetryAfter(r.retryAfter); ok {
		return exporterhelper.NewThrottleRetry(err, delay)
	}
	return err
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}
