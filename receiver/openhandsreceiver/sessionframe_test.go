package openhandsreceiver

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeSessionFrame(t *testing.T) {
	seq := int64(7)
	for _, c := range []struct {
		name, raw string
		want      sessionFrame
		wantErr   bool
	}{
		{name: "durable", raw: `{"type":"durable","seq":7,"event":{"kind":"ActionEvent","n":1.5},"extra":[1]}`,
			want: sessionFrame{Type: "durable", Seq: &seq, Event: map[string]any{"kind": "ActionEvent", "n": json.Number("1.5")}}},
		{name: "delta", raw: `{"type":"delta","item_id":"i","attempt":2,"order":3,"kind":"text","content":"hi"}`,
			want: sessionFrame{Type: "delta", ItemID: "i", Attempt: 2, Order: 3, Kind: "text", Content: "hi"}},
		{name: "sync", raw: `{"type":"sync","from_seq":null,"through_seq":7}`,
			want: sessionFrame{Type: "sync", ThroughSeq: &seq}},
		{name: "error", raw: `{"type":"error","code":"frame_too_large","detail":"d"}`,
			want: sessionFrame{Type: "error", Code: "frame_too_large", Detail: "d"}},
		{name: "null members read as absent", raw: `{"type":"transient","seq":null,"event":null,"item_id":null}`,
			want: sessionFrame{Type: "transient"}},
		{name: "seq of another type", raw: `{"type":"durable","seq":"7"}`, wantErr: true},
		{name: "fractional seq", raw: `{"type":"durable","seq":7.5}`, wantErr: true},
		{name: "seq past int64", raw: `{"type":"durable","seq":9223372036854775808}`, wantErr: true},
		{name: "type of another type", raw: `{"type":1}`, wantErr: true},
		{name: "not an object", raw: `[1]`, wantErr: true},
		{name: "not JSON", raw: `{"type":`, wantErr: true},
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
