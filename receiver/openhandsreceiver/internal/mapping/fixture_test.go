package mapping

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

// pinnedShape is what the fixture pins of a mapped event.
func pinnedShape(ev *aep.Event) map[string]any {
	shape := map[string]any{"type": ev.Type, "data": ev.Data}
	if ev.Subject != "" {
		shape["subject"] = ev.Subject
	}
	if ev.Step != "" {
		shape["step"] = ev.Step
	}
	return shape
}

// mapFixtureInput maps one fixture input in a conversation whose status
// already equals the one the input reports, so that run synthesis adds
// nothing and the output is the input's own mapping.
func mapFixtureInput(t *testing.T, cfg Config, input json.RawMessage) []*aep.Event {
	t.Helper()
	ev, err := DecodeEvent(input)
	require.NoError(t, err)
	c := newConversation(t, cfg)
	if status, ok := executionStatus(str(ev.Fields, "key"), ev.Fields["value"]); ok {
		require.NotEmpty(t, c.Map(stateEvent(t, "prime", status), received))
	}
	return c.Map(ev, received)
}

// requirePinned compares type, data, subject and step exactly. The two
// args_digest pins cannot be reproduced from their inputs (AEP brief §3.4),
// so there the digest must be 32 lowercase hex over the action object.
func requirePinned(t *testing.T, input, expected json.RawMessage, got []*aep.Event) {
	t.Helper()
	if string(expected) == "null" {
		require.Empty(t, got)
		return
	}
	require.Len(t, got, 1, "types %v", types(got))
	requireValid(t, got)
	shape := pinnedShape(got[0])
	var want map[string]any
	require.NoError(t, json.Unmarshal(expected, &want))
	if wantData, _ := want["data"].(map[string]any); wantData["args_digest"] != nil {
		digest, _ := got[0].Data["args_digest"].(string)
		require.Regexp(t, hex32, digest)
		ev, err := DecodeEvent(input)
		require.NoError(t, err)
		overAction, err := aep.Digest(ev.Fields["action"])
		require.NoError(t, err)
		require.Equal(t, overAction, digest)
		data := aep.CloneValue(got[0].Data).(map[string]any)
		data["args_digest"] = wantData["args_digest"]
		shape["data"] = data
	}
	assert.Equal(t, canonical(t, expected), canonical(t, shape))
}

func TestFixtureEvents(t *testing.T) {
	f := loadFixture(t)
	for _, tc := range fixtureCases(f) {
		t.Run(tc.name, func(t *testing.T) {
			requirePinned(t, tc.Input, tc.Expected, mapFixtureInput(t, testConfig(aep.CaptureMetadata, false), tc.Input))
		})
		if tc.DeltasExpected == nil {
			continue
		}
		t.Run(tc.name+"/deltas", func(t *testing.T) {
			requirePinned(t, tc.Input, tc.DeltasExpected, mapFixtureInput(t, testConfig(aep.CaptureMetadata, true), tc.Input))
		})
	}
}

// TestFixtureArgsDigestDeterministic: the unpinned digest input is at least
// stable, across conversations and key order.
func TestFixtureArgsDigestDeterministic(t *testing.T) {
	f := loadFixture(t)
	for _, name := range []string{"action_event", "action_event_unknown_risk"} {
		t.Run(name, func(t *testing.T) {
			first := mapFixtureInput(t, testConfig(aep.CaptureMetadata, false), f.Events[name].Input)
			second := mapFixtureInput(t, testConfig(aep.CaptureMetadata, false), f.Events[name].Input)
			require.Len(t, first, 1)
			require.Len(t, second, 1)
			require.Equal(t, first[0].Data["args_digest"], second[0].Data["args_digest"])
		})
	}
}

func TestFixtureStatusTransitions(t *testing.T) {
	f := loadFixture(t)
	for name, tr := range f.StatusTransitions {
		t.Run(name, func(t *testing.T) {
			got := StatusMoments(tr.Prev, tr.Next)
			shapes := make([]any, len(got))
			for i, m := range got {
				shapes[i] = map[string]any{"type": m.Type, "data": m.Data}
			}
			assert.Equal(t, canonical(t, tr.Expected), canonical(t, shapes))
		})
	}
}
