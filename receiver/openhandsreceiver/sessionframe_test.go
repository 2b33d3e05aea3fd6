package openhandsreceiver

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

func TestDecodeSessionFrame(t *testing.T) {
	seq := int64(7)
	for _, c := range []struct {
		name, raw string
		want      sessionFrame
		wantErr   bool
	}{
		{name: "durable", raw: `{"type":"durable","seq":7,"event":{"kind":"ActionEvent","n":1.5},"extra":[1]}`,
			want: sessionFrame{Type: "durable", Seq: 7, HasSeq: true, Event: map[string]any{"kind": "ActionEvent", "n": json.Number("1.5")}}},
		{name: "delta", raw: `{"type":"delta","item_id":"i","attempt":2,"order":3,"kind":"text","content":"hi"}`,
			want: sessionFrame{Type: "delta", ItemID: "i", Attempt: 2, Order: 3, Kind: "text", Content: "hi"}},
		{name: "sync", raw: `{"type":"sync","from_seq":null,"through_seq":7}`,
			want: sessionFrame{Type: "sync", ThroughSeq: &seq}},
		{name: "error", raw: `{"type":"error","code":"frame_too_large","detail":"d"}`,
			want: sessionFrame{Type: "error", Code: "frame_too_large", Detail: "d"}},
		{name: "null members read as absent", raw: `{"type":"transient","seq":null,"event":null,"item_id":null}`,
			want: sessionFrame{Type: "transient"}},
		{name: "the last of a name given twice counts", raw: `{"type":"delta","seq":"7","type":"durable","seq":7,"item_id":"i","item_id":null}`,
			want: sessionFrame{Type: "durable", Seq: 7, HasSeq: true}},
		{name: "seq of another type", raw: `{"type":"durable","seq":"7"}`, wantErr: true},
		{name: "fractional seq", raw: `{"type":"durable","seq":7.5}`, wantErr: true},
		{name: "seq past int64", raw: `{"type":"durable","seq":9223372036854775808}`, wantErr: true},
		{name: "type of another type", raw: `{"type":1}`, wantErr: true},
		{name: "not an object", raw: `[1]`, wantErr: true},
		{name: "not JSON", raw: `{"type":`, wantErr: true},
		{name: "trailing data", raw: `{"type":"durable"} {}`, wantErr: true},
		{name: "empty", raw: ``, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeSessionFrame([]byte(c.raw))
			if c.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// toolFramePair is one terminal tool call as the session socket delivers
// it: the ActionEvent, then the ObservationEvent answering it.
var toolFramePair = [][]byte{
	[]byte(`{"type":"durable","seq":42,"event":{"action":{"command":"ls -la /workspace","is_input":false,"kind":"TerminalAction","reset":false},"id":"8f6c2f9e-5d1b-4d8e-9a0b-0c3f2b1a7e6d","kind":"ActionEvent","llm_response_id":"chatcmpl-820adf65d2834eb6b52f354c","security_risk":"UNKNOWN","source":"agent","thinking_blocks":[],"thought":[],"timestamp":"2026-12-01T19:20:19.123456","tool_call":{"arguments":"{\"command\":\"ls -la /workspace\",\"is_input\":false,\"reset\":false}","id":"call_05a1d9721c2c4e3f8728ade9","name":"terminal","origin":"completion"},"tool_call_id":"call_05a1d9721c2c4e3f8728ade9","tool_name":"terminal"}}`),
	[]byte(`{"type":"durable","seq":43,"event":{"action_id":"8f6c2f9e-5d1b-4d8e-9a0b-0c3f2b1a7e6d","extended_content":[],"id":"2b7d0c1e-9f3a-4c6b-8e2d-5a1f0b9c7d3e","kind":"ObservationEvent","observation":{"command":"ls -la /workspace","content":[{"cache_prompt":false,"text":"total 12\ndrwxr-xr-x 3 root root 4096 Dec  1 19:20 .\ndrwxr-xr-x 1 root root 4096 Dec  1 19:18 ..\n-rw-r--r-- 1 root root  220 Dec  1 19:20 README.md","type":"text"}],"exit_code":0,"is_error":false,"kind":"TerminalObservation","metadata":{"exit_code":0,"pid":42,"prefix":"","suffix":"","working_dir":"/workspace"},"timeout":false},"source":"environment","timestamp":"2026-12-01T19:20:19.734012","tool_call_id":"call_05a1d9721c2c4e3f8728ade9","tool_name":"terminal"}}`),
}

// BenchmarkToolFramePair measures what the receiver does to a tool call's
// two frames before emission: decode the envelope, take its event, map
// and decorate it; per op, one pair in an open run (the answer closes the
// call, so every pair finds the conversation as the first did).
func BenchmarkToolFramePair(b *testing.B) {
	redactor, err := newRedactor(createDefaultConfig().(*Config))
	require.NoError(b, err)
	for _, level := range []aep.Capture{aep.CaptureMetadata, aep.CaptureRedacted} {
		b.Run(string(level), func(b *testing.B) {
			cfg := mapping.Config{
				ConversationID: "0d3c2b1a-7e6d-4d8e-9a0b-8f6c2f9e5d1b",
				ServerHost:     "127.0.0.1:8000",
				Ceiling:        mapping.CapturePolicy{Default: level},
				Redactor:       redactor,
			}
			mapper, err := mapping.NewConversation(cfg, nil)
			require.NoError(b, err)
			decorator := mapping.NewDecorator(&mapping.DecoratorState{})
			now := time.Date(2026, 12, 1, 19, 20, 20, 0, time.UTC)
			running, err := mapping.DecodeEvent([]byte(`{"id":"5e1d7c3a-2b9f-4a6e-8d0c-1f3b5a7c9e2d","key":"execution_status","kind":"ConversationStateUpdateEvent","source":"environment","timestamp":"2026-12-01T19:20:18.000001","value":"running"}`))
			require.NoError(b, err)
			decorator.Decorate(running, mapper.Map(running, now))
			require.NotEmpty(b, mapper.Run())
			b.ReportAllocs()
			for b.Loop() {
				for _, raw := range toolFramePair {
					f, err := decodeSessionFrame(raw)
					if err != nil {
						b.Fatal(err)
					}
					ev, err := mapping.EventOf(f.Event)
					if err != nil {
						b.Fatal(err)
					}
					if out := decorator.Decorate(ev, mapper.Map(ev, now)); len(out) != 1 {
						b.Fatalf("%s mapped to %d events", ev.Kind(), len(out))
					}
				}
			}
		})
	}
}
