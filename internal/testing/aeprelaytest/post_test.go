package aeprelaytest

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/stream"
)

// requireBuffersOrdered checks every buffered session is in (epoch, seq)
// order.
func requireBuffersOrdered(t *testing.T, r *Relay) {
	t.Helper()
	for _, ref := range r.Sessions() {
		var prev *aep.Event
		for _, rec := range r.SessionEvents(ref.Source, ref.Session) {
			if prev != nil && prev.Seq != nil && rec.Event.Seq != nil {
				a := position{prev.EffectiveEpoch(), *prev.Seq}
				b := position{rec.Event.EffectiveEpoch(), *rec.Event.Seq}
				require.LessOrEqual(t, a.compare(b), 0, "session %s of %s out of order", ref.Session, ref.Source)
			}
			prev = rec.Event
		}
	}
}

func TestPostEachGoldenLine(t *testing.T) {
	r := Start(t, Config{})
	golden := aeptest.Golden(t)
	for _, line := range golden {
		t.Run(line.Name(), func(t *testing.T) {
			status, body := post(t, r, "application/json", string(line.Raw), nil)
			require.Equal(t, http.StatusAccepted, status, "body %v", body)
			events := r.Events()
			last := events[len(events)-1]
			assert.Equal(t, line.Raw, last.Raw, "recorded byte-identically")
			assert.Equal(t, BindingPOST, last.Binding)
			assert.Empty(t, r.Violations())
		})
	}
	assert.Equal(t, len(golden), r.Received())
	requireBuffersOrdered(t, r)
}

func TestPostGoldenFileAsNDJSON(t *testing.T) {
	r := Start(t, Config{})
	golden := aeptest.Golden(t)
	var body bytes.Buffer
	for _, line := range golden {
		body.Write(line.Raw)
		body.WriteByte('\n')
	}
	status, answer := post(t, r, "application/x-ndjson", body.String(), nil)
	require.Equal(t, http.StatusAccepted, status, "body %v", answer)
	assert.Empty(t, r.Violations())
	assert.Equal(t, len(golden), r.Received())

	events := r.Events()
	require.Len(t, events, len(golden), "every golden (source, id) is distinct")
	for i, line := range golden {
		assert.Equal(t, line.Raw, events[i].Raw, "batch order is preserved (line %d)", i)
	}
	requireBuffersOrdered(t, r)

	buffered := 0
	for _, ref := range r.Sessions() {
		buffered += len(r.SessionEvents(ref.Source, ref.Session))
	}
	agentScoped, commands := 0, 0
	for _, line := range golden {
		switch {
		case strings.HasPrefix(line.Event.Type, "agent."):
			agentScoped++
		case isCommand(line.Event.Type):
			commands++
		}
	}
	assert.Equal(t, len(golden)-agentScoped-commands, buffered, "agent.* and commands are never buffered")
	assert.Len(t, r.Commands(), commands, "POSTed commands are routed (here: refused, tokenless)")

	t.Run("redelivered file", func(t *testing.T) {
		status, _ := post(t, r, "application/x-ndjson", body.String(), nil)
		require.Equal(t, http.StatusAccepted, status)
		assert.Equal(t, 2*len(golden), r.Received())
		assert.Len(t, r.Events(), len(golden), "redeliveries are deduped on (source, id)")
		after := 0
		for _, ref := range r.Sessions() {
			after += len(r.SessionEvents(ref.Source, ref.Session))
		}
		assert.Equal(t, buffered, after, "buffer admission dedupes")
		assert.Empty(t, r.Violations(), "a byte-identical redelivery breaks no rule")
	})
}

// streamRule is the stream package rule err wraps.
func streamRule(err error) error {
	for _, rule := range []error{stream.ErrOrdering, stream.ErrIDCollision, stream.ErrLifecycle, stream.ErrAckExclusivity, stream.ErrFormValues} {
		if errors.Is(err, rule) {
			return rule
		}
	}
	return nil
}

// TestPostInvalidFixtures: single-Event cases are refused 400 and recorded
// as schema violations; stream cases are accepted, as the reference relay
// validates envelopes only, and recorded as the stream violation a direct
// stream.Checker reports.
func TestPostInvalidFixtures(t *testing.T) {
	for _, tc := range aeptest.Invalid(t) {
		t.Run(tc.Name, func(t *testing.T) {
			r := Start(t, Config{})
			if tc.Events == nil {
				status, body := post(t, r, "application/json", string(tc.Event), nil)
				require.Equal(t, http.StatusBadRequest, status)
				assert.Equal(t, "invalid-event", body["error"])
				assert.NotEmpty(t, body["detail"])
				assert.Equal(t, float64(0), body["line"])
				assert.Zero(t, r.Received(), "nothing ingested")
				v := r.Violations()
				require.Len(t, v, 1)
				assert.Equal(t, ViolationSchema, v[0].Kind)
				var se *schema.Error
				assert.ErrorAs(t, v[0].Err, &se)

				status, body = post(t, r, "application/x-ndjson", event("progress.status", "ok", 0, 0)+"\n"+string(tc.Event)+"\n", nil)
				require.Equal(t, http.StatusBadRequest, status)
				assert.Equal(t, float64(1), body["line"], "the first failing line is named")
				assert.Zero(t, r.Received(), "the whole batch is refused")
				return
			}
			var want error
			var wantID string
			var c stream.Checker
			var body bytes.Buffer
			for _, raw := range tc.Events {
				body.Write(raw)
				body.WriteByte('\n')
				ev, err := aep.Parse(raw)
				require.NoError(t, err)
				if err := c.Add(ev); err != nil && want == nil {
					want, wantID = streamRule(err), ev.ID
				}
			}
			require.NotNil(t, want, "the case must break a stream rule")
			status, answer := post(t, r, "application/x-ndjson", body.String(), nil)
			require.Equal(t, http.StatusAccepted, status, "body %v", answer)
			assert.Equal(t, len(tc.Events), r.Received())
			v := r.Violations()
			require.NotEmpty(t, v)
			assert.Equal(t, ViolationStream, v[0].Kind)
			assert.ErrorIs(t, v[0].Err, want)
			assert.Equal(t, wantID, v[0].EventID)
		})
	}
}

func TestPostRefusals(t *testing.T) {
	r := Start(t, Config{Token: "sesame", MaxBody: 2048, MaxBatch: 3})
	valid := event("progress.status", "s1", 0, 0)
	lines := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(event("progress.status", "batch", 0, i) + "\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name        string
		contentType string
		body        string
		headers     map[string]string
		status      int
		answer      map[string]any
	}{
		{"payload-too-large", "application/json", strings.Repeat(" ", 4096) + valid, nil,
			http.StatusRequestEntityTooLarge, map[string]any{"error": "payload-too-large"}},
		{"too-many-events", "application/x-ndjson", lines(4), nil,
			http.StatusRequestEntityTooLarge, map[string]any{"error": "too-many-events"}},
		{"wrong content type", "text/plain", valid, nil,
			http.StatusUnsupportedMediaType, map[string]any{"error": "unsupported-media-type"}},
		{"missing AEP-Version", "application/json", valid, map[string]string{"AEP-Version": ""},
			http.StatusUpgradeRequired, map[string]any{"versions": []any{"0.1"}}},
		{"other major AEP-Version", "application/json", valid, map[string]string{"AEP-Version": "1.0"},
			http.StatusUpgradeRequired, map[string]any{"versions": []any{"0.1"}}},
		{"no token", "application/json", valid, map[string]string{"Authorization": ""},
			http.StatusUnauthorized, map[string]any{"error": "unauthorized"}},
		{"wrong token", "application/json", valid, map[string]string{"Authorization": "Bearer nope"},
			http.StatusUnauthorized, map[string]any{"error": "unauthorized"}},
		{"empty body", "application/json", "", nil,
			http.StatusBadRequest, map[string]any{"error": "invalid-event"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, r, tc.contentType, tc.body, tc.headers)
			require.Equal(t, tc.status, status, "body %v", body)
			for k, v := range tc.answer {
				assert.Equal(t, v, body[k], k)
			}
			assert.Zero(t, r.Received(), "nothing ingested")
		})
	}
	t.Run("payload-too-large without a length", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, r.URL()+"/events", io.MultiReader(strings.NewReader(strings.Repeat(" ", 4096)), strings.NewReader(valid)))
		require.NoError(t, err)
		req.ContentLength = -1 // chunked: the limit trips while reading
		req.Header.Set("AEP-Version", "0.1")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sesame")
		status, body := do(t, req)
		require.Equal(t, http.StatusRequestEntityTooLarge, status)
		assert.Equal(t, "payload-too-large", body["error"])
	})
	t.Run("accepted with the header token", func(t *testing.T) {
		status, _ := post(t, r, "application/json; charset=utf-8", valid, map[string]string{"AEP-Version": "0.1.2"})
		require.Equal(t, http.StatusAccepted, status)
	})
	t.Run("accepted with the query token", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, r.URL()+"/events?access_token=sesame", strings.NewReader(lines(3)))
		require.NoError(t, err)
		req.Header.Set("AEP-Version", "0.1")
		req.Header.Set("Content-Type", "application/x-ndjson")
		status, _ := do(t, req)
		require.Equal(t, http.StatusAccepted, status)
		assert.Equal(t, 4, r.Received())
	})
}

func TestDiscoveryAndHealth(t *testing.T) {
	r := Start(t, Config{Token: "sesame", BufferPerSession: 7})
	for _, path := range []string{"/events", "/.well-known/aep"} {
		t.Run(path, func(t *testing.T) {
			status, _ := get(t, r, path, "")
			require.Equal(t, http.StatusUnauthorized, status)
			status, body := get(t, r, path, "sesame")
			require.Equal(t, http.StatusOK, status)
			assert.Equal(t, []any{"0.1"}, body["aep"])
			assert.Equal(t, "collector", body["role"])
			assert.Equal(t, map[string]any{"events": "/events", "stream": "/stream", "socket": "/socket"}, body["endpoints"])
			caps := body["capabilities"].(map[string]any)
			assert.Equal(t, []any{"attr-match"}, caps["filters"])
			assert.Equal(t, map[string]any{"buffer": float64(7), "all": true}, caps["replay"])
			assert.Equal(t, map[string]any{"accepts": []any{}}, caps["control"])
			assert.Equal(t, map[string]any{}, caps["roster"])
		})
	}
	t.Run("healthz without auth", func(t *testing.T) {
		status, body := get(t, r, "/healthz", "")
		require.Equal(t, http.StatusOK, status)
		assert.Equal(t, map[string]any{"ok": true}, body, "counts stay behind auth")
	})
	t.Run("healthz with auth", func(t *testing.T) {
		status, body := get(t, r, "/healthz", "sesame")
		require.Equal(t, http.StatusOK, status)
		assert.Equal(t, true, body["ok"])
		assert.Contains(t, body, "sessions")
		assert.Contains(t, body, "connections")
	})
}
