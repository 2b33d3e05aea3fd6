package vendormap

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schema"
)

// codexRecord is a record as Codex's log_event! writes it: every field
// formatted with Display (strings), plus the common fields of every record.
func codexRecord(name string, attrs map[string]any) Record {
	rec := Record{
		Resource: map[string]any{"service.name": "codex_cli_rs", "host.name": "ws-7", "env": "dev"},
		Attributes: map[string]any{
			"event.name": name, "event.timestamp": "2026-12-02T01:02:03.456Z",
			"conversation.id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "app.version": "0.64.0",
			"originator": "codex_cli_rs", "auth_mode": "chatgpt", "terminal.type": "xterm",
			"model": "gpt-5-codex", "slug": "gpt-5-codex",
			"user.email": "dev@example.com", "user.account_id": "acct_1",
		},
	}
	for k, v := range attrs {
		rec.Attributes[k] = v
	}
	return rec
}

func redactor(t *testing.T) *capture.Redactor {
	t.Helper()
	r, err := capture.NewRedactor(capture.RedactorConfig{})
	require.NoError(t, err)
	return r
}

const awsKey = "AKIAIOSFODNN7EXAMPLE"

func TestCaptureCeilings(t *testing.T) {
	toolResult := codexRecord("codex.tool_result", map[string]any{
		"tool_name": "shell", "call_id": "call_1", "arguments": `{"cmd":"cat ~/.aws"}`,
		"duration_ms": "12", "success": "false", "output": "key " + awsKey,
	})
	prompt := codexRecord("codex.user_prompt", map[string]any{"prompt": "mail dev@example.com", "prompt_length": "20"})
	placeholder := codexRecord("codex.user_prompt", map[string]any{"prompt": "[REDACTED]", "prompt_length": "20"})
	for _, tc := range []struct {
		name    string
		rec     Record
		mode    Mode
		ceiling aep.Capture
		present map[string]any // data keys and their values; nil value: present, any value
		absent  []string
	}{
		{name: "metadata keeps no content and no person", rec: toolResult, ceiling: aep.CaptureMetadata,
			present: map[string]any{"tool_name": "shell", "call_id": "call_1", "model": "gpt-5-codex", "auth_mode": "chatgpt"},
			absent:  []string{"arguments", "output", "user.email", "user.account_id", "conversation.id", "event.timestamp"}},
		{name: "redacted keeps content through the pipeline", rec: toolResult, ceiling: aep.CaptureRedacted,
			present: map[string]any{"arguments": nil, "output": nil},
			absent:  []string{"user.email", "user.account_id"}},
		{name: "full keeps content and the person raw", rec: toolResult, ceiling: aep.CaptureFull,
			present: map[string]any{"output": "key " + awsKey, "user.email": "dev@example.com"}},
		{name: "a sent prompt at redacted", rec: prompt, ceiling: aep.CaptureRedacted,
			present: map[string]any{"prompt_length": "20", "prompt": nil}},
		{name: "a sent prompt at metadata", rec: prompt, ceiling: aep.CaptureMetadata,
			present: map[string]any{"prompt_length": "20"}, absent: []string{"prompt"}},
		{name: "the vendor's placeholder is no prompt, even at full", rec: placeholder, ceiling: aep.CaptureFull,
			present: map[string]any{"prompt_length": "20"}, absent: []string{"prompt"}},
		{name: "primary failure message at redacted", rec: codexRecord("codex.tool_result", map[string]any{
			"tool_name": "shell", "success": "false", "error": "token " + awsKey}), mode: ModePrimary, ceiling: aep.CaptureRedacted,
			present: map[string]any{"error": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Map(Codex, tc.rec, Options{Mode: tc.mode, Ceiling: tc.ceiling, Redactor: redactor(t)})
			require.True(t, ok)
			require.Equal(t, tc.ceiling, got.Capture)
			for k, want := range tc.present {
				require.Contains(t, got.Data, k)
				if want != nil {
					assert.Equal(t, want, got.Data[k], k)
				}
			}
			for _, k := range tc.absent {
				assert.NotContains(t, got.Data, k)
			}
			if tc.ceiling == aep.CaptureRedacted {
				raw, err := json.Marshal(got.Data)
				require.NoError(t, err)
				assert.NotContains(t, string(raw), awsKey)
				assert.NotContains(t, string(raw), "dev@example.com")
			}
			require.NoError(t, schema.Validate(envelope(got)))
		})
	}
	t.Run("none keeps the envelope only", func(t *testing.T) {
		for _, mode := range []Mode{ModeCompanion, ModePrimary} {
			got, ok := Map(Codex, toolResult, Options{Mode: mode, Ceiling: aep.CaptureNone})
			require.True(t, ok)
			assert.Nil(t, got.Data)
			assert.Equal(t, aep.CaptureNone, got.Capture)
		}
	})
	t.Run("redacted without a redactor keeps no content", func(t *testing.T) {
		got, ok := Map(Codex, toolResult, Options{Ceiling: aep.CaptureRedacted})
		require.True(t, ok)
		assert.NotContains(t, got.Data, "output")
	})
}

// TestRealExporterShapes: what the vendors' exporters send beside what the
// fixtures pin (README "What the agents really send").
func TestRealExporterShapes(t *testing.T) {
	vscode := func(name string, attrs map[string]any) Record {
		rec := Record{Resource: map[string]any{"service.name": "copilot-chat", "service.version": "0.38.0", "session.id": "win-1"},
			Attributes: map[string]any{"event.name": name}}
		for k, v := range attrs {
			rec.Attributes[k] = v
		}
		return rec
	}
	for _, tc := range []struct {
		name   string
		vendor Vendor
		rec    Record
		opts   Options
		want   string // type; "" expects nothing
		data   map[string]any
	}{
		{name: "codex denied by the automated reviewer", vendor: Codex, opts: Options{Mode: ModePrimary},
			rec:  codexRecord("codex.tool_decision", map[string]any{"tool_name": "shell", "call_id": "c1", "decision": "denied", "source": "automated_reviewer"}),
			want: "tool.denied", data: map[string]any{"tool": map[string]any{"name": "shell", "call_id": "c1"}, "by": "runtime"}},
		{name: "codex network policy deny by config", vendor: Codex, opts: Options{Mode: ModePrimary},
			rec:  codexRecord("codex.tool_decision", map[string]any{"tool_name": "shell", "decision": "denied_with_network_policy_deny", "source": "config"}),
			want: "tool.denied", data: map[string]any{"tool": map[string]any{"name": "shell"}, "by": "policy"}},
		{name: "codex timed out review is no event", vendor: Codex, opts: Options{Mode: ModePrimary},
			rec: codexRecord("codex.tool_decision", map[string]any{"tool_name": "shell", "decision": "timed_out", "source": "automated_reviewer"})},
		{name: "codex approved by config is no event", vendor: Codex, opts: Options{Mode: ModePrimary},
			rec: codexRecord("codex.tool_decision", map[string]any{"tool_name": "shell", "decision": "approved", "source": "config"})},
		{name: "codex abort by the user is no event", vendor: Codex, opts: Options{Mode: ModePrimary},
			rec: codexRecord("codex.tool_decision", map[string]any{"tool_name": "shell", "decision": "abort", "source": "user"})},
		{name: "codex abort by config is a policy denial", vendor: Codex, opts: Options{Mode: ModePrimary},
			rec:  codexRecord("codex.tool_decision", map[string]any{"tool_name": "shell", "decision": "abort", "source": "config"}),
			want: "tool.denied", data: map[string]any{"tool": map[string]any{"name": "shell"}, "by": "policy"}},
		{name: "codex success as Display text, call id kept", vendor: Codex, opts: Options{Mode: ModePrimary},
			rec:  codexRecord("codex.tool_result", map[string]any{"tool_name": "apply_patch", "call_id": "c2", "success": "true", "duration_ms": "7"}),
			want: "tool.completed", data: map[string]any{"tool": map[string]any{"name": "apply_patch", "call_id": "c2"}, "duration_ms": json.Number("7")}},
		{name: "codex event.kind rides as sent", vendor: Codex,
			rec:  codexRecord("codex.sse_event", map[string]any{"event.kind": "response.completed", "input_token_count": "10"}),
			want: "x.codex.otel.sse_event", data: map[string]any{"event.kind": "response.completed", "input_token_count": "10"}},
		{name: "codex websocket_connect is not documented: unknown", vendor: Codex,
			rec:  codexRecord("codex.websocket_connect", map[string]any{"success": "true"}),
			want: "x.codex.otel.unknown", data: map[string]any{"event.name": "codex.websocket_connect"}},
		{name: "vscode double duration rounds to an integer", vendor: VSCode, opts: Options{Mode: ModePrimary},
			rec:  vscode("copilot_chat.tool.call", map[string]any{"gen_ai.tool.name": "readFile", "duration_ms": json.Number("63.4"), "success": true}),
			want: "tool.completed", data: map[string]any{"tool": map[string]any{"name": "readFile"}, "duration_ms": json.Number("63")}},
		{name: "vscode double duration rounds half up", vendor: VSCode, opts: Options{Mode: ModePrimary},
			rec:  vscode("copilot_chat.tool.call", map[string]any{"gen_ai.tool.name": "readFile", "duration_ms": json.Number("63.5"), "success": true}),
			want: "tool.completed", data: map[string]any{"tool": map[string]any{"name": "readFile"}, "duration_ms": json.Number("64")}},
		{name: "vscode failure without error.type", vendor: VSCode, opts: Options{Mode: ModePrimary},
			rec:  vscode("copilot_chat.tool.call", map[string]any{"gen_ai.tool.name": "runInTerminal", "success": false}),
			want: "tool.failed", data: map[string]any{"tool": map[string]any{"name": "runInTerminal"}, "error": map[string]any{"type": "tool_error"}}},
		{name: "vscode tool call without a flag keeps its companion type", vendor: VSCode, opts: Options{Mode: ModePrimary},
			rec:  vscode("copilot_chat.tool.call", map[string]any{"gen_ai.tool.name": "readFile"}),
			want: "x.vscode.otel.tool.call", data: map[string]any{"gen_ai.tool.name": "readFile"}},
		{name: "vscode second chat start in one window session", vendor: VSCode, opts: Options{Mode: ModePrimary, SessionStarted: true},
			rec:  vscode("copilot_chat.session.start", map[string]any{"session.id": "chat-2", "gen_ai.request.model": "gpt-5.2"}),
			want: "x.vscode.otel.session.start", data: map[string]any{"gen_ai.request.model": "gpt-5.2", "session.id": "chat-2"}},
		{name: "vscode start of the window's own session keeps no session.id", vendor: VSCode,
			rec:  vscode("copilot_chat.session.start", map[string]any{"session.id": "win-1", "gen_ai.request.model": "gpt-5.2"}),
			want: "x.vscode.otel.session.start", data: map[string]any{"gen_ai.request.model": "gpt-5.2"}},
		{name: "vscode hunk action is not documented: unknown", vendor: VSCode,
			rec:  vscode("copilot_chat.edit.hunk.action", map[string]any{"outcome": "accepted"}),
			want: "x.vscode.otel.unknown", data: map[string]any{"event.name": "copilot_chat.edit.hunk.action"}},
		{name: "vscode inference content absent at metadata", vendor: VSCode,
			rec: vscode("gen_ai.client.inference.operation.details", map[string]any{
				"gen_ai.request.model": "gpt-5.2", "gen_ai.system_instructions": "be terse", "gen_ai.output.messages": "[]",
				"gen_ai.response.finish_reasons": []any{"stop"}}),
			want: "x.vscode.otel.inference_details", data: map[string]any{"gen_ai.request.model": "gpt-5.2", "gen_ai.response.finish_reasons": []any{"stop"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Map(tc.vendor, tc.rec, tc.opts)
			if tc.want == "" {
				require.False(t, ok, "got %s", got.Type)
				return
			}
			require.True(t, ok)
			require.Equal(t, tc.want, got.Type)
			data := got.Data
			if got.Type == "x.codex.otel.sse_event" {
				data = map[string]any{"event.kind": data["event.kind"], "input_token_count": data["input_token_count"]}
			}
			assert.Equal(t, canonical(t, tc.data), canonical(t, data))
			require.NoError(t, schema.Validate(envelope(got)))
		})
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rec     Record
		enabled []Vendor
		want    Vendor
	}{
		{name: "codex by its prefix, any service name", want: Codex,
			rec: Record{Resource: map[string]any{"service.name": "my-codex"}, Attributes: map[string]any{"event.name": "codex.api_request"}}},
		{name: "the event_name field when the attribute is absent", want: Codex,
			rec: Record{EventName: "codex.tool_result"}},
		{name: "a GenAI record from the copilot-chat resource", want: VSCode,
			rec: Record{Resource: map[string]any{"service.name": "copilot-chat"}, Attributes: map[string]any{"event.name": "gen_ai.client.inference.operation.details"}}},
		{name: "a GenAI record from another service is not ours",
			rec: Record{Resource: map[string]any{"service.name": "checkout"}, Attributes: map[string]any{"event.name": "gen_ai.client.inference.operation.details"}}},
		{name: "an ordinary application log is not ours",
			rec: Record{Resource: map[string]any{"service.name": "checkout"}, Attributes: map[string]any{"http.route": "/"}}},
		{name: "a vendor not enabled is not ours", enabled: []Vendor{VSCode},
			rec: Record{Attributes: map[string]any{"event.name": "codex.api_request"}}},
		{name: "a non-string event.name falls back to the field", want: VSCode,
			rec: Record{Attributes: map[string]any{"event.name": json.Number("1")}, EventName: "copilot_chat.tool.call"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enabled := tc.enabled
			if enabled == nil {
				enabled = Vendors
			}
			got, ok := Classify(tc.rec, enabled)
			require.Equal(t, tc.want != "", ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRecordTime(t *testing.T) {
	ts := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		rec  Record
		want time.Time
	}{
		{name: "timestamp first", rec: Record{Timestamp: ts, Observed: ts.Add(time.Second)}, want: ts},
		{name: "observed when the timestamp is unset", rec: Record{Observed: ts}, want: ts},
		{name: "codex event.timestamp when both are unset",
			rec: Record{Attributes: map[string]any{"event.timestamp": "2026-12-02T01:00:00.000Z"}}, want: ts},
		{name: "none", rec: Record{Attributes: map[string]any{"event.timestamp": "yesterday"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.rec.Time()
			require.Equal(t, !tc.want.IsZero(), ok)
			require.True(t, tc.want.Equal(got), "got %v", got)
		})
	}
}

func TestFromLogRecord(t *testing.T) {
	res := pcommon.NewResource()
	res.Attributes().PutStr("session.id", "win-1")
	lr := plog.NewLogRecord()
	lr.SetEventName("copilot_chat.tool.call")
	lr.SetTimestamp(pcommon.Timestamp(1_000_000_000))
	lr.Body().SetStr("copilot_chat.tool.call: readFile")
	a := lr.Attributes()
	a.PutInt("duration_ms", 63)
	a.PutDouble("ratio", 0.5)
	a.PutDouble("bad", math.NaN())
	a.PutBool("success", true)
	a.PutEmptyBytes("raw").FromRaw([]byte{1, 2})
	a.PutEmptySlice("reasons").AppendEmpty().SetStr("stop")
	a.PutEmptyMap("nested").PutInt("n", 1)
	rec := FromLogRecord(res, lr)
	assert.Equal(t, map[string]any{"session.id": "win-1"}, rec.Resource)
	assert.Equal(t, map[string]any{
		"duration_ms": json.Number("63"), "ratio": json.Number("0.5"), "bad": "NaN", "success": true,
		"raw": "AQI=", "reasons": []any{"stop"}, "nested": map[string]any{"n": json.Number("1")},
	}, rec.Attributes)
	assert.Equal(t, "copilot_chat.tool.call", rec.EventName)
	assert.Equal(t, int64(1), rec.Timestamp.Unix())
	assert.True(t, rec.Observed.IsZero())
}
