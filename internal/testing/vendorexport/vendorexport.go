// Package vendorexport builds OTLP log exports shaped as coding agents'
// own exporters send them (Codex, the VS Code Copilot Chat extension), for
// the tests and the demo that feed them to the otlp receiver and the
// aepinbound processor.
package vendorexport

import (
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// appendResource adds a resource naming the service, its version and one
// more attribute (where the vendor puts identity), and returns its records.
func appendResource(ld plog.Logs, service, version, key, value string) plog.LogRecordSlice {
	rl := ld.ResourceLogs().AppendEmpty()
	res := rl.Resource().Attributes()
	res.PutStr("service.name", service)
	res.PutStr("service.version", version)
	res.PutStr(key, value)
	return rl.ScopeLogs().AppendEmpty().LogRecords()
}

// Codex is shaped as Codex's OTLP log exporter sends it: one
// resource for the process (service.name, service.version, host.name),
// every field formatted as text, event.timestamp on every record and no
// time fields set, two conversations in one process, and a record of
// another kind that is not the vendor's. A codex.sse_event is a completed
// response with its token usage.
func Codex(startSecond int, names ...string) plog.Logs {
	ld := plog.NewLogs()
	lrs := appendResource(ld, "codex_cli_rs", "0.64.0", "host.name", "ws-7")
	for i, name := range names {
		lr := lrs.AppendEmpty()
		a := lr.Attributes()
		a.PutStr("event.name", name)
		a.PutStr("event.timestamp", time.Date(2026, 12, 2, 1, 0, startSecond+i, 0, time.UTC).Format("2006-01-02T15:04:05.000Z"))
		a.PutStr("conversation.id", []string{"019a-conv-a", "019a-conv-b"}[i%2])
		a.PutStr("app.version", "0.64.0")
		a.PutStr("originator", "codex_cli_rs")
		a.PutStr("model", "gpt-5-codex")
		a.PutStr("user.email", "dev@example.com")
		switch name {
		case "codex.tool_result":
			a.PutStr("tool_name", "shell")
			a.PutStr("call_id", "call_"+strconv.Itoa(i))
			a.PutStr("arguments", `{"command":["ls"]}`)
			a.PutStr("duration_ms", "41")
			a.PutStr("success", "true")
			a.PutStr("output", "README.md")
		case "codex.tool_decision":
			a.PutStr("tool_name", "shell")
			a.PutStr("decision", "denied")
			a.PutStr("source", "config")
		case "codex.sse_event":
			// A completed response and its usage (sse_event_completed):
			// the counts Display-formatted, the optional ones typed.
			a.PutStr("event.kind", "response.completed")
			a.PutStr("input_token_count", "12480")
			a.PutStr("output_token_count", "820")
			a.PutInt("cached_token_count", 10240)
			a.PutInt("reasoning_token_count", 384)
			a.PutStr("tool_token_count", "0")
		}
	}
	lrs.AppendEmpty().Body().SetStr("an application log line that is not an agent's")
	return ld
}

// VSCode is shaped as the Copilot Chat extension's JS SDK sends it:
// session.id on the resource (one per window), typed values, both time
// fields set, a summary in the body.
func VSCode() plog.Logs {
	ld := plog.NewLogs()
	lrs := appendResource(ld, "copilot-chat", "0.38.0", "session.id", "vsc-window-1")
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	add := func(body string, attrs map[string]any) {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
		lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(at))
		lr.Body().SetStr(body)
		if err := lr.Attributes().FromRaw(attrs); err != nil {
			panic(err)
		}
		at = at.Add(time.Second)
	}
	add("copilot_chat.session.start", map[string]any{"event.name": "copilot_chat.session.start", "session.id": "chat-1", "gen_ai.request.model": "gpt-5.2", "gen_ai.agent.name": "agent"})
	add("copilot_chat.tool.call: readFile", map[string]any{"event.name": "copilot_chat.tool.call", "gen_ai.tool.name": "readFile", "duration_ms": 63, "success": true})
	add("copilot_chat.tool.call: runInTerminal", map[string]any{"event.name": "copilot_chat.tool.call", "gen_ai.tool.name": "runInTerminal", "duration_ms": 842, "success": false, "error.type": "ToolCallError"})
	add("GenAI inference: gpt-5.2", map[string]any{"event.name": "gen_ai.client.inference.operation.details", "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-5.2", "gen_ai.usage.input_tokens": 1204, "gen_ai.usage.output_tokens": 388})
	add("copilot_chat.session.start", map[string]any{"event.name": "copilot_chat.session.start", "session.id": "chat-2", "gen_ai.request.model": "gpt-5.2"})
	return ld
}
