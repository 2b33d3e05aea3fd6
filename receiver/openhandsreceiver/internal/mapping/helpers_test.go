package mapping

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schemas"
)

const (
	testConversation = "conv-1"
	testHost         = "127.0.0.1:8000"
	secret           = "hunter2"
	secretMark       = "[REDACTED:secret]"
)

var (
	received   = time.Date(2026, 7, 12, 10, 15, 1, 500_000_000, time.UTC)
	hex32      = regexp.MustCompile(`^[0-9a-f]{32}$`)
	typeSyntax = regexp.MustCompile(`^((agent|session|run|progress|tool|delegation|attention|resource|error|state|assessment|message|control)(\.[a-z0-9_]+)+|x\.[a-z0-9_-]+\.[a-z0-9_]+(\.[a-z0-9_]+)+)$`)
)

// fakeRedactor stands in for the capture package: it knows one secret.
type fakeRedactor struct{}

func (fakeRedactor) Text(s string) string { return strings.ReplaceAll(s, secret, secretMark) }

func (r fakeRedactor) Value(v any) any {
	switch t := v.(type) {
	case string:
		return r.Text(t)
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = r.Value(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = r.Value(x)
		}
		return s
	default:
		return v
	}
}

// fakeStream holds back any tail that could still become the secret.
type fakeStream struct{ held string }

func (s *fakeStream) Write(chunk string) string {
	buf := strings.ReplaceAll(s.held+chunk, secret, secretMark)
	keep := 0
	for k := len(secret) - 1; k > 0; k-- {
		if strings.HasSuffix(buf, secret[:k]) {
			keep = k
			break
		}
	}
	s.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep]
}

func (s *fakeStream) Flush() string {
	rest := s.held
	s.held = ""
	return rest
}

func testConfig(level aep.Capture, deltas bool) Config {
	return Config{
		ConversationID:    testConversation,
		ServerHost:        testHost,
		Ceiling:           CapturePolicy{Default: level},
		Deltas:            deltas,
		Redactor:          fakeRedactor{},
		NewStreamRedactor: func() StreamRedactor { return &fakeStream{} },
	}
}

func newConversation(tb testing.TB, cfg Config) *Conversation {
	tb.Helper()
	c, err := NewConversation(cfg, nil)
	require.NoError(tb, err)
	return c
}

// vendorEvent builds a decoded vendor event from fields.
func vendorEvent(tb testing.TB, fields map[string]any) Event {
	tb.Helper()
	raw, err := json.Marshal(fields)
	require.NoError(tb, err)
	ev, err := DecodeEvent(raw)
	require.NoError(tb, err)
	return ev
}

func stateEvent(tb testing.TB, id, status string) Event {
	tb.Helper()
	return vendorEvent(tb, map[string]any{
		"kind": "ConversationStateUpdateEvent", "id": id, "timestamp": "2026-07-12T10:15:00.123456",
		"source": "environment", "key": "execution_status", "value": status,
	})
}

func types(evs []*aep.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// feed maps events in order and returns every output.
func feed(tb testing.TB, c *Conversation, evs ...Event) []*aep.Event {
	tb.Helper()
	var out []*aep.Event
	for _, ev := range evs {
		out = append(out, c.Map(ev, received)...)
	}
	return out
}

// requireValid checks each event against the envelope and payload schemas,
// with the seq the receiver would assign.
func requireValid(tb testing.TB, evs []*aep.Event) {
	tb.Helper()
	for i, ev := range evs {
		withSeq := ev.Clone()
		withSeq.Seq = aep.Int64(int64(i))
		require.NoError(tb, schema.Validate(withSeq), "event %d %s", i, ev.Type)
	}
}

// requireLifecycle checks the AEP stream invariants over one conversation's
// output (run.py lifecycle_error and id_collision_error, stricter: no
// repeated id at all and nothing after session.ended).
func requireLifecycle(tb testing.TB, evs []*aep.Event) {
	tb.Helper()
	ids := map[string]bool{}
	terminals := map[string]bool{}
	pending := map[string]bool{}
	ended := false
	for i, ev := range evs {
		require.False(tb, ended, "event %d %s after session.ended", i, ev.Type)
		require.False(tb, ids[ev.ID], "event %d %s repeats id %s", i, ev.Type, ev.ID)
		ids[ev.ID] = true
		switch ev.Type {
		case typeRunFinished, typeRunFailed, typeRunCancelled:
			require.NotEmpty(tb, ev.Run, "terminal %d without run", i)
			require.False(tb, terminals[ev.Run], "second terminal for %s", ev.Run)
			terminals[ev.Run] = true
		case typeAttentionRequested:
			pending[ev.ID] = true
		case typeAttentionResolved:
			require.True(tb, pending[ev.Subject], "resolved %d names no pending request", i)
			delete(pending, ev.Subject)
		case typeSessionEnded:
			require.Empty(tb, pending, "session ended with pending attention")
			ended = true
		}
	}
}

func marshal(tb testing.TB, ev *aep.Event) string {
	tb.Helper()
	raw, err := json.Marshal(ev)
	require.NoError(tb, err)
	return string(raw)
}

// --- the pinned fixture -----------------------------------------------------

type fixtureCase struct {
	Input          json.RawMessage `json:"input"`
	Expected       json.RawMessage `json:"expected"`
	DeltasExpected json.RawMessage `json:"deltas_expected"` // nil when absent
}

type fixtureTransition struct {
	Prev     *string         `json:"prev"`
	Next     string          `json:"next"`
	Expected json.RawMessage `json:"expected"`
}

type fixture struct {
	Events            map[string]fixtureCase       `json:"events"`
	Fallback          fixtureCase                  `json:"fallback"`
	StatusTransitions map[string]fixtureTransition `json:"status_transitions"`
}

func loadFixture(tb testing.TB) fixture {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(aeptest.FixturesDir(tb), "mappings", "openhands.json"))
	require.NoError(tb, err)
	var f fixture
	require.NoError(tb, json.Unmarshal(raw, &f))
	require.NotEmpty(tb, f.Events)
	require.NotEmpty(tb, f.StatusTransitions)
	return f
}

type namedCase struct {
	name string
	fixtureCase
}

// fixtureCases lists events then the fallback, in name order.
func fixtureCases(f fixture) []namedCase {
	names := make([]string, 0, len(f.Events))
	for n := range f.Events {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]namedCase, 0, len(names)+1)
	for _, n := range names {
		out = append(out, namedCase{n, f.Events[n]})
	}
	return append(out, namedCase{"fallback", f.Fallback})
}

// canonical is the RFC 8785 form of a decoded or raw JSON value.
func canonical(tb testing.TB, v any) string {
	tb.Helper()
	if raw, ok := v.(json.RawMessage); ok {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var x any
		require.NoError(tb, dec.Decode(&x))
		v = x
	}
	c, err := aep.Canonical(v)
	require.NoError(tb, err)
	return string(c)
}

// downlevelToMetadata is the reference down-level (AEP-0002 §5.1, run.py
// downlevel) of data to metadata: fields annotated above metadata go,
// unannotated ones count as metadata and stay; vendor types have no schema
// and lose data wholesale. If content rode in an unannotated field, it
// would survive here, which is the leak this helper exposes.
func downlevelToMetadata(tb testing.TB, ev *aep.Event) map[string]any {
	tb.Helper()
	if ev.Data == nil || ev.EffectiveCapture().Rank() <= aep.CaptureMetadata.Rank() {
		return ev.Data
	}
	raw, err := schemas.FS.ReadFile(schemas.TypePath(ev.Type))
	if err != nil {
		return nil // no schema: the whole payload goes
	}
	var s map[string]any
	require.NoError(tb, json.Unmarshal(raw, &s))
	return keepMetadata(ev.Data, s).(map[string]any)
}

func keepMetadata(v any, node map[string]any) any {
	obj, ok := v.(map[string]any)
	props, _ := node["properties"].(map[string]any)
	if !ok || props == nil {
		return v
	}
	out := map[string]any{}
	for k, x := range obj {
		prop, _ := props[k].(map[string]any)
		if level, _ := prop["x-aep-capture"].(string); aep.Capture(level).Rank() > aep.CaptureMetadata.Rank() {
			continue
		}
		kept := keepMetadata(x, prop)
		// An object emptied by the down-level (error.raised's error, which
		// holds only the redacted message) carries nothing: compare without it.
		if m, ok := kept.(map[string]any); ok && len(m) == 0 && len(x.(map[string]any)) > 0 {
			continue
		}
		out[k] = kept
	}
	return out
}
