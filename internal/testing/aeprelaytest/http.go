package aeprelaytest

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// authorized applies the single bearer token (AEP-0003 §8.1): without one
// configured every request passes.
func (r *Relay) authorized(req *http.Request) bool {
	r.mu.Lock()
	token := r.token
	r.mu.Unlock()
	if token == "" {
		return true
	}
	return subtle.ConstantTimeCompare([]byte(bearer(req)), []byte(token)) == 1
}

func (r *Relay) authorizedOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if !r.authorized(req) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="aep"`)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unauthorized"})
			return
		}
		h(w, req)
	}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	raw, err := json.Marshal(body)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	writeRawJSON(w, status, raw)
}

func writeRawJSON(w http.ResponseWriter, status int, raw []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}

// versionSupported reads the AEP-Version header: 0.1, or a 0.1.x patch.
func versionSupported(v string) bool {
	v = strings.TrimSpace(v)
	return v == aep.Version || strings.HasPrefix(v, aep.Version+".")
}

// handlePost is the emit binding (AEP-0003 §3.2): the checks answer in
// the reference relay's order of cost, and a batch is judged whole before
// any of it is ingested.
func (r *Relay) handlePost(w http.ResponseWriter, req *http.Request) {
	if !versionSupported(req.Header.Get("AEP-Version")) {
		writeJSON(w, http.StatusUpgradeRequired, map[string]any{"versions": supportedVersions})
		return
	}
	mediaType, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || (mediaType != "application/json" && mediaType != "application/x-ndjson") {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{
			"error": "unsupported-media-type", "detail": "use application/json or application/x-ndjson",
		})
		return
	}
	if req.ContentLength > r.cfg.MaxBody {
		r.tooLarge(w)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			r.tooLarge(w)
			return
		}
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unreadable-body", "detail": err.Error()})
		return
	}
	lines := [][]byte{body}
	if mediaType == "application/x-ndjson" {
		lines = bytes.Split(body, []byte("\n"))
	}
	batch, status, answer := r.admitBatch(lines, mediaType == "application/x-ndjson")
	if status != http.StatusAccepted {
		writeJSON(w, status, answer)
		return
	}
	r.mu.Lock()
	for _, in := range batch {
		r.ingestLocked(in, nil)
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (r *Relay) tooLarge(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{
		"error": "payload-too-large", "detail": fmt.Sprintf("body exceeds %d bytes", r.cfg.MaxBody),
	})
}

// admitBatch validates every line (blank NDJSON lines are skipped) and
// returns the Events to ingest, or the status and body of the refusal.
// line in a 400 is the 0-based line of the body.
func (r *Relay) admitBatch(lines [][]byte, ndjson bool) ([]*ingested, int, map[string]any) {
	count := 0
	for _, line := range lines {
		if len(bytes.TrimSpace(line)) > 0 || !ndjson {
			count++
		}
	}
	if count > r.cfg.MaxBatch {
		return nil, http.StatusRequestEntityTooLarge, map[string]any{
			"error": "too-many-events", "detail": fmt.Sprintf("%d events exceed the batch limit of %d", count, r.cfg.MaxBatch),
		}
	}
	batch := make([]*ingested, 0, count)
	for i, line := range lines {
		if ndjson && len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		raw := normalize(line)
		ev, _, err := r.admit(raw, nil, BindingPOST, 0)
		if err != nil {
			return nil, http.StatusBadRequest, map[string]any{"error": "invalid-event", "detail": err.Error(), "line": i}
		}
		batch = append(batch, newIngested(raw, ev, BindingPOST, 0))
	}
	return batch, http.StatusAccepted, nil
}

func (r *Relay) handleDiscovery(w http.ResponseWriter, _ *http.Request) {
	writeRawJSON(w, http.StatusOK, r.discovery)
}

// handleHealth is the one unauthenticated route; counts are topology and
// stay behind auth.
func (r *Relay) handleHealth(w http.ResponseWriter, req *http.Request) {
	body := map[string]any{"ok": true}
	if r.authorized(req) {
		r.mu.Lock()
		body["sessions"] = len(r.st.store.buffers)
		body["subscribers"] = len(r.streams) + r.subscriptionsLocked()
		body["connections"] = len(r.conns)
		r.mu.Unlock()
		body["uptime_s"] = int64(time.Since(r.started).Seconds())
	}
	writeJSON(w, http.StatusOK, body)
}

func (r *Relay) subscriptionsLocked() int {
	n := 0
	for c := range r.conns {
		n += len(c.subs)
	}
	return n
}
