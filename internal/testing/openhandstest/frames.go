package openhandstest

import "strings"

// Ready-made malformed frames for [Conversation.InjectFrame]: what a
// receiver must survive without losing the connection's good traffic.

// BadJSONFrame returns a frame that is not valid JSON (a truncated event).
func BadJSONFrame() []byte {
	return []byte(`{"kind":"MessageEvent","id":"` + NewUUID() + `","timestamp":"2026-08-22T14:03:11.402137","source":`)
}

// UnknownKindFrame returns a well-formed event of a kind no SDK defines.
func UnknownKindFrame() []byte {
	return []byte(`{"kind":"FutureTelepathyEvent","id":"` + NewUUID() +
		`","timestamp":"2026-08-22T14:03:11.402137","source":"agent","thoughts":["..."]}`)
}

// MissingFieldsFrame returns a MessageEvent without id, timestamp and
// llm_message.
func MissingFieldsFrame() []byte {
	return []byte(`{"kind":"MessageEvent","source":"agent","activated_skills":[],"extended_content":[]}`)
}

// OversizeFrame returns a valid agent MessageEvent of at least n bytes.
func OversizeFrame(n int) []byte {
	head := `{"kind":"MessageEvent","id":"` + NewUUID() + `","timestamp":"2026-08-22T14:03:11.402137",` +
		`"source":"agent","llm_message":{"role":"assistant","content":[{"type":"text","cache_prompt":false,"text":"`
	tail := `"}],"thinking_blocks":[]},"activated_skills":[],"extended_content":[]}`
	pad := max(n-len(head)-len(tail), 0)
	return []byte(head + strings.Repeat("x", pad) + tail)
}
