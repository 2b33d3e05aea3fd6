package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// The control gate end to end: commands enter at the relay as an operator
// would send them, the collector executes them against the stub agent
// server, and every ack and outcome comes back through the relay, which
// validates each one (schema, stream order, ack exclusivity).

const (
	// gateOn opens the gate with a reply guard short enough to expire
	// within a test when the stub holds a write.
	gateOn  = "    enabled: true\n    ack_window: 5s\n    reply_guard: 1500ms\n    send_input_max_chars: 40"
	gateOff = "    enabled: false"
	// contentCapture lets control details and answer text ride (redacted),
	// as the README recommends for a gated deployment.
	contentCapture = "\n    capture:\n      level: metadata\n      categories:\n        attention: redacted\n        control: redacted"
	operator       = "aep://ops/agent/mission-control"
)

var allAccepted = []string{
	"control.attention.respond", "control.pause", "control.resume",
	"x.openhands.control.send_input", "x.openhands.control.interrupt",
}

// startGated starts a pipeline whose receiver and exporter name the
// control extension configured as control.
func startGated(t *testing.T, control string) *env {
	t.Helper()
	e := newEnv(t)
	e.start(pipelineConfig{control: control, receiverExtra: contentCapture})
	return e
}

// conversationIn creates a conversation in status and waits until the
// collector has attached to it and shows that status.
func (e *env) conversationIn(status string) *oh.Conversation {
	e.t.Helper()
	c, err := e.stub.CreateConversation(oh.ConversationOptions{})
	require.NoError(e.t, err)
	e.awaitLive(c, 1)
	if status != oh.StatusIdle {
		e.setStatus(c, status)
	}
	return c
}

// setStatus moves the conversation as its agent would and waits for the
// state.delta that reports it.
func (e *env) setStatus(c *oh.Conversation, status string) {
	e.t.Helper()
	before := len(e.relayEvents(c.ID()))
	ev, err := c.SetStatus(status)
	require.NoError(e.t, err)
	awaitEvents(e.t, "relay", func() []*aep.Event { return e.relayEvents(c.ID()) }, func(evs []*aep.Event) bool {
		return len(evs) > before && slices.ContainsFunc(evs, func(a *aep.Event) bool { return a.Data["vendor_event_id"] == ev.ID() })
	})
}

// cmd is one command as an operator's console would send it.
type cmd struct {
	typ, session, subject string
	data                  map[string]any
	id                    string
	rendered              []byte
}

// raw renders the command once: every delivery of it is the same bytes,
// as a sender's retries are.
func (c *cmd) raw(t *testing.T) []byte {
	t.Helper()
	if c.rendered != nil {
		return c.rendered
	}
	if c.id == "" {
		c.id = aep.DeterministicID(time.Now(), c.typ+c.session+c.subject+time.Now().String())
	}
	capture := aep.CaptureMetadata
	if c.data != nil {
		capture = aep.CaptureRedacted // answer.text and send_input text are [r]
	}
	ev := aep.Event{
		AEP: aep.Version, ID: c.id, Type: c.typ, Subject: c.subject,
		Time: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), Source: operator,
		Agent: "mission-control", Session: c.session, Capture: capture, Data: c.data,
	}
	raw, err := json.Marshal(ev)
	require.NoError(t, err)
	c.rendered = raw
	return raw
}

// send routes the command through the relay, which must forward it.
func (e *env) send(c *cmd) {
	e.t.Helper()
	refusal, err := e.relay.SendCommand(c.raw(e.t))
	require.NoError(e.t, err)
	require.Nil(e.t, refusal, "the relay refused %s on our behalf", c.typ)
}

// awaitAck waits for the command's ack and returns the session's events
// at that moment.
func (e *env) awaitAck(c *cmd) (*aep.Event, []*aep.Event) {
	e.t.Helper()
	var ack *aep.Event
	evs := awaitEvents(e.t, "relay", func() []*aep.Event { return e.relayEvents(c.session) }, func(evs []*aep.Event) bool {
		ack = ackOf(evs, c.id)
		return ack != nil
	})
	return ack, evs
}

func ackOf(evs []*aep.Event, command string) *aep.Event {
	for _, ev := range evs {
		if (ev.Type == "control.accepted" || ev.Type == "control.rejected") && ev.Cause == command {
			return ev
		}
	}
	return nil
}

// awaitCaused waits for an event of typ caused by the command.
func (e *env) awaitCaused(c *cmd, typ string) (*aep.Event, []*aep.Event) {
	e.t.Helper()
	var found *aep.Event
	evs := awaitEvents(e.t, "relay", func() []*aep.Event { return e.relayEvents(c.session) }, func(evs []*aep.Event) bool {
		found = nil
		for _, ev := range evs {
			if ev.Type == typ && ev.Cause == c.id {
				found = ev
			}
		}
		return found != nil
	})
	return found, evs
}

func assertRejected(t *testing.T, ack *aep.Event, reason, detailContains string) {
	t.Helper()
	require.Equal(t, "control.rejected", ack.Type, "ack %v", ack.Data)
	assert.Equal(t, reason, ack.Data["reason"])
	if detailContains != "" {
		assert.Contains(t, ack.Data["detail"], detailContains)
	}
}

// assertNoWrites checks the stub saw nothing but reads and auth frames.
func assertNoWrites(t *testing.T, stub *oh.Server) {
	t.Helper()
	assert.Empty(t, stub.Writes(), "REST writes reached the agent server")
	for _, f := range stub.InboundFrames() {
		assert.True(t, f.IsAuth(), "a socket frame other than auth reached the agent server: %s", f.Data)
	}
}

// emitterConn is the relay's id of the collector's connection.
func (e *env) emitterConn() int {
	e.t.Helper()
	for _, c := range e.relay.Connections() {
		if c.Agent == "openhands" {
			return c.ID
		}
	}
	e.t.Fatal("the collector has no relay connection")
	return 0
}

// awaitingApproval creates a running conversation whose agent then puts a
// terminal command up for approval, and returns the attention.requested.
func (e *env) awaitingApproval(command string) (*oh.Conversation, *aep.Event) {
	e.t.Helper()
	conv := e.conversationIn(oh.StatusRunning)
	_, err := conv.Append(oh.ActionEvent(oh.ActionSpec{Action: map[string]any{"kind": "TerminalAction", "command": command}}))
	require.NoError(e.t, err)
	e.setStatus(conv, oh.StatusWaitingForConfirmation)
	return conv, last(e.awaitTypes(conv, "attention.requested"), "attention.requested")
}

// declaredAccepts is the accepts of the collector's latest hello.
func (e *env) declaredAccepts() []string {
	e.t.Helper()
	hellos := e.relay.Hellos()
	require.NotEmpty(e.t, hellos)
	return hellos[len(hellos)-1].Accepts
}

func TestControlGateOffWritesNothing(t *testing.T) {
	e := startGated(t, gateOff)
	conv, request := e.awaitingApproval("ls")
	assert.Equal(t, []string{}, e.declaredAccepts(), "a closed gate declares accepts: []")
	assert.NotContains(t, request.Data, "options", "the read-only request offers no options")
	assert.NotContains(t, request.Data, "respond_via")

	commands := []*cmd{
		{typ: "control.attention.respond", subject: request.ID, data: map[string]any{"answer": map[string]any{"option": "approve"}}},
		{typ: "control.pause"}, {typ: "control.resume"}, {typ: "x.openhands.control.interrupt"},
		{typ: "x.openhands.control.send_input", data: map[string]any{"text": "hello"}},
		{typ: "control.cancel", data: map[string]any{"scope": "run"}},
	}
	for _, c := range commands {
		c.session = conv.ID()
		refusal, err := e.relay.SendCommand(c.raw(t))
		require.NoError(t, err)
		require.NotNil(t, refusal, "%s: the relay must refuse on our behalf", c.typ)
		assert.Equal(t, "unsupported", refusal.Code)
	}
	// A relay that routes anyway: the gate answers each unsupported.
	conn := e.emitterConn()
	for _, c := range commands {
		require.NoError(t, e.relay.SendFrame(conn, c.raw(t)))
	}
	for _, c := range commands {
		ack, _ := e.awaitAck(c)
		assertRejected(t, ack, "unsupported", "gate is off")
	}
	e.verify(conv)
	assertNoWrites(t, e.stub)
}

// startGatedWithoutToken starts the open gate behind a tokenless relay,
// the exporter sending no credentials.
func startGatedWithoutToken(t *testing.T) *env {
	t.Helper()
	e := &env{
		t:     t,
		stub:  oh.Start(t, oh.Config{SessionAPIKeys: []string{stubKey}}),
		relay: aeprelaytest.Start(t, aeprelaytest.Config{DrainTimeout: time.Second}),
		otlp:  startOTLPSink(t),
	}
	e.start(pipelineConfig{control: gateOn, noToken: true, receiverExtra: contentCapture})
	return e
}

func TestControlRelayWithoutTokenIsWatchOnly(t *testing.T) {
	e := startGatedWithoutToken(t)
	conv := e.conversationIn(oh.StatusRunning)
	c := &cmd{typ: "control.pause", session: conv.ID()}
	refusal, err := e.relay.SendCommand(c.raw(t))
	require.NoError(t, err)
	require.NotNil(t, refusal)
	assert.Equal(t, "unauthorized", refusal.Code)
	assert.Zero(t, e.relay.Commands()[0].To, "never routed")
	e.verify(conv)
	assert.Nil(t, ackOf(e.relayEvents(conv.ID()), c.id))
	assertNoWrites(t, e.stub)
}

func TestControlOpenGateWithoutCredentialsExecutesNothing(t *testing.T) {
	e := startGatedWithoutToken(t)
	conv, request := e.awaitingApproval("rm -rf /")
	assert.Equal(t, []string{}, e.declaredAccepts(), "a link without credentials declares accepts: []")

	// A relay that routes anyway (a hostile one, or anyone on a ws://
	// link): every command gets the closed gate's answer.
	commands := []*cmd{
		{typ: "control.attention.respond", subject: request.ID, data: map[string]any{"answer": map[string]any{"option": "approve"}}},
		{typ: "control.pause"}, {typ: "control.resume"}, {typ: "x.openhands.control.interrupt"},
		{typ: "x.openhands.control.send_input", data: map[string]any{"text": "hello"}},
	}
	conn := e.emitterConn()
	for _, c := range commands {
		c.session = conv.ID()
		require.NoError(t, e.relay.SendFrame(conn, c.raw(t)))
	}
	for _, c := range commands {
		ack, _ := e.awaitAck(c)
		assertRejected(t, ack, "unsupported", "relay link sends no credentials")
	}
	assert.Equal(t, oh.StatusWaitingForConfirmation, conv.Status())
	e.verify(conv)
	assertNoWrites(t, e.stub)
}

func TestControlPauseAndResume(t *testing.T) {
	e := startGated(t, gateOn)
	conv := e.conversationIn(oh.StatusRunning)
	hellos := e.relay.Hellos()
	assert.Equal(t, allAccepted, hellos[len(hellos)-1].Accepts)
	assert.Equal(t, int64(5000), hellos[len(hellos)-1].AckWindowMS)

	pause := &cmd{typ: "control.pause", session: conv.ID()}
	e.send(pause)
	delta, evs := e.awaitCaused(pause, "state.delta")
	ack := ackOf(evs, pause.id)
	require.NotNil(t, ack)
	assert.Equal(t, "control.accepted", ack.Type)
	assert.Less(t, *ack.Seq, *delta.Seq, "the ack precedes its outcome")
	assert.Equal(t, "execution_status", delta.Data["key"])
	assert.Equal(t, oh.StatusPaused, conv.Status())

	resume := &cmd{typ: "control.resume", session: conv.ID()}
	e.send(resume)
	delta, evs = e.awaitCaused(resume, "state.delta")
	assert.Equal(t, "execution_status", delta.Data["key"])
	assert.Equal(t, oh.StatusRunning, conv.Status())
	assert.Equal(t, "control.accepted", ackOf(evs, resume.id).Type)

	writes := e.stub.Writes()
	require.Len(t, writes, 2)
	assert.Equal(t, "/api/conversations/"+conv.ID()+"/pause", writes[0].Path)
	assert.Equal(t, "/api/conversations/"+conv.ID()+"/run", writes[1].Path)
	for _, w := range writes {
		assert.Equal(t, http.MethodPost, w.Method)
		assert.Equal(t, stubKey, w.Header.Get("X-Session-API-Key"))
	}
	for _, f := range e.stub.InboundFrames() {
		assert.True(t, f.IsAuth(), "the socket stays auth-frame-only under the gate: %s", f.Data)
	}
	// The vendor's PauseEvent rides uncolored: one outcome, one cause link.
	pauseEvent := last(e.relayEvents(conv.ID()), "x.openhands.pause.event")
	require.NotNil(t, pauseEvent)
	assert.Empty(t, pauseEvent.Cause)
	e.verify(conv)
}

func TestControlWithStorage(t *testing.T) {
	// Acks and outcomes take the receiver's one emission path, write-ahead
	// included.
	e := newEnv(t)
	e.start(pipelineConfig{control: gateOn, receiverExtra: contentCapture, storage: t.TempDir()})
	conv := e.conversationIn(oh.StatusRunning)
	pause := &cmd{typ: "control.pause", session: conv.ID()}
	e.send(pause)
	delta, evs := e.awaitCaused(pause, "state.delta")
	assert.Less(t, *ackOf(evs, pause.id).Seq, *delta.Seq)
	refused := &cmd{typ: "control.pause", session: conv.ID()}
	e.send(refused)
	ack, _ := e.awaitAck(refused)
	assertRejected(t, ack, "refused", "its status is paused")
	e.verify(conv)
}

func TestControlInterrupt(t *testing.T) {
	e := startGated(t, gateOn)
	conv := e.conversationIn(oh.StatusRunning)
	interrupt := &cmd{typ: "x.openhands.control.interrupt", session: conv.ID()}
	e.send(interrupt)
	delta, evs := e.awaitCaused(interrupt, "state.delta")
	assert.Equal(t, "execution_status", delta.Data["key"])
	assert.Equal(t, oh.StatusPaused, conv.Status())
	assert.Equal(t, "control.accepted", ackOf(evs, interrupt.id).Type)
	e.awaitTypes(conv, "x.openhands.interrupt.event")
	assert.Equal(t, "/api/conversations/"+conv.ID()+"/interrupt", e.stub.Writes()[0].Path)
	e.verify(conv)
}

func TestControlGuardsRefuseBeforeWriting(t *testing.T) {
	e := startGated(t, gateOn)
	for _, tc := range []struct {
		status, typ, detail string
	}{
		{oh.StatusIdle, "control.pause", "only while the conversation is running; its status is idle"},
		{oh.StatusPaused, "control.pause", "its status is paused"},
		{oh.StatusFinished, "x.openhands.control.interrupt", "its status is finished"},
		{oh.StatusIdle, "x.openhands.control.interrupt", "its status is idle"},
		{oh.StatusIdle, "control.resume", "only from paused; the conversation's status is idle"},
		{oh.StatusRunning, "control.resume", "status is running"},
		{oh.StatusWaitingForConfirmation, "control.resume", "answer the pending request with control.attention.respond"},
		{oh.StatusRunning, "control.attention.respond", "no attention request is pending"},
	} {
		t.Run(tc.typ+" from "+tc.status, func(t *testing.T) {
			conv := e.conversationIn(tc.status)
			c := &cmd{typ: tc.typ, session: conv.ID()}
			if tc.typ == "control.attention.respond" {
				c.subject, c.data = "01KNOTAREQUEST0000000000000", map[string]any{"answer": map[string]any{"option": "approve"}}
			}
			e.send(c)
			ack, _ := e.awaitAck(c)
			assertRejected(t, ack, "refused", tc.detail)
			assert.Equal(t, tc.status, conv.Status())
		})
	}
	assertNoWrites(t, e.stub)
	e.verify()
}

func TestControlAttentionRoundTrip(t *testing.T) {
	e := startGated(t, gateOn)
	// waiting puts a conversation with one pending action up for approval.
	waiting := func() (*oh.Conversation, *aep.Event) {
		conv := e.conversationIn(oh.StatusRunning)
		_, err := conv.Append(oh.ActionEvent(oh.ActionSpec{Action: map[string]any{"kind": "TerminalAction", "command": "rm -rf build"}}))
		require.NoError(t, err)
		e.setStatus(conv, oh.StatusWaitingForConfirmation)
		request := last(e.awaitTypes(conv, "attention.requested"), "attention.requested")
		assert.Equal(t, []any{
			map[string]any{"id": "approve", "label": "Approve"},
			map[string]any{"id": "deny", "label": "Deny"},
		}, request.Data["options"], "the open gate makes the request answerable")
		assert.Equal(t, []any{"control"}, request.Data["respond_via"])
		return conv, request
	}
	// roundTrip answers and checks request → ack → answered → resolved.
	roundTrip := func(t *testing.T, conv *oh.Conversation, request *aep.Event, answer map[string]any, wantStatus string) *aep.Event {
		t.Helper()
		respond := &cmd{typ: "control.attention.respond", session: conv.ID(), subject: request.ID, data: map[string]any{"answer": answer}}
		e.send(respond)
		resolved, evs := e.awaitCaused(respond, "attention.resolved")
		answered := last(evs, "attention.answered")
		ack := ackOf(evs, respond.id)
		require.NotNil(t, answered)
		require.NotNil(t, ack)
		assert.Equal(t, "control.accepted", ack.Type)
		assert.Equal(t, request.ID, answered.Subject)
		assert.Equal(t, respond.id, answered.Cause)
		assert.Equal(t, request.ID, resolved.Subject)
		assert.Equal(t, "answered", resolved.Data["resolution"])
		assert.Equal(t, "control", answered.Data["via"])
		assert.Equal(t, "mission-control", answered.Data["by"])
		assert.Less(t, *ack.Seq, *answered.Seq)
		assert.Less(t, *answered.Seq, *resolved.Seq)
		assert.Equal(t, wantStatus, conv.Status())
		return answered
	}

	t.Run("approve", func(t *testing.T) {
		conv, request := waiting()
		answered := roundTrip(t, conv, request, map[string]any{"option": "approve"}, oh.StatusRunning)
		assert.Equal(t, map[string]any{"option": "approve"}, answered.Data["answer"])
		writes := e.stub.Writes()
		assert.JSONEq(t, `{"accept":true}`, string(writes[len(writes)-1].Body))
	})
	t.Run("deny with a reason", func(t *testing.T) {
		conv, request := waiting()
		answered := roundTrip(t, conv, request, map[string]any{"option": "deny", "text": "not on the shared host"}, oh.StatusIdle)
		assert.Equal(t, map[string]any{"option": "deny", "text": "not on the shared host"}, answered.Data["answer"])
		writes := e.stub.Writes()
		assert.JSONEq(t, `{"accept":false,"reason":"not on the shared host"}`, string(writes[len(writes)-1].Body))
		e.awaitTypes(conv, "x.openhands.user_reject.observation")
	})
	t.Run("deny by text alone takes the vendor default", func(t *testing.T) {
		conv, request := waiting()
		answered := roundTrip(t, conv, request, map[string]any{"text": " Deny "}, oh.StatusIdle)
		assert.Equal(t, map[string]any{"option": "deny"}, answered.Data["answer"])
		writes := e.stub.Writes()
		assert.JSONEq(t, `{"accept":false,"reason":"User rejected the action."}`, string(writes[len(writes)-1].Body))
	})
	t.Run("unmatched text never approves", func(t *testing.T) {
		conv, request := waiting()
		roundTrip(t, conv, request, map[string]any{"text": "sure, go ahead"}, oh.StatusIdle)
		writes := e.stub.Writes()
		assert.JSONEq(t, `{"accept":false,"reason":"sure, go ahead"}`, string(writes[len(writes)-1].Body))
	})
	t.Run("a subject that is not the live request", func(t *testing.T) {
		conv, request := waiting()
		stale := &cmd{typ: "control.attention.respond", session: conv.ID(), subject: "01KSTALEREQUEST000000000000",
			data: map[string]any{"answer": map[string]any{"option": "approve"}}}
		writes := len(e.stub.Writes())
		e.send(stale)
		ack, _ := e.awaitAck(stale)
		assertRejected(t, ack, "refused", "is not the live pending request "+request.ID)
		assert.Len(t, e.stub.Writes(), writes)
		assert.Equal(t, oh.StatusWaitingForConfirmation, conv.Status())
	})
	t.Run("a flip nobody commanded stays plain", func(t *testing.T) {
		conv, request := waiting()
		e.setStatus(conv, oh.StatusRunning) // approved in the OpenHands UI
		evs := e.awaitTypes(conv, "attention.resolved")
		resolved := last(evs, "attention.resolved")
		assert.Equal(t, request.ID, resolved.Cause)
		assert.Nil(t, last(evs, "attention.answered"), "the bridge did not answer")
	})
	e.verify()
}

func TestControlSendInput(t *testing.T) {
	e := startGated(t, gateOn)
	conv := e.conversationIn(oh.StatusIdle)
	input := &cmd{typ: "x.openhands.control.send_input", session: conv.ID(), data: map[string]any{"text": "also run the linter"}}
	e.send(input)
	sent, evs := e.awaitCaused(input, "x.openhands.input.sent")
	ack := ackOf(evs, input.id)
	assert.Equal(t, "control.accepted", ack.Type)
	assert.Less(t, *ack.Seq, *sent.Seq)
	raw, err := json.Marshal(sent)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "linter", "the text is never echoed")
	message := last(e.relayEvents(conv.ID()), "x.openhands.message.event")
	require.NotNil(t, message, "the appended message rides the socket like any other")
	assert.Equal(t, "user", message.Data["role"])
	assert.Equal(t, oh.StatusIdle, conv.Status(), "run is pinned false")
	writes := e.stub.Writes()
	require.Len(t, writes, 1)
	assert.JSONEq(t, `{"role":"user","content":[{"type":"text","text":"also run the linter"}],"run":false}`, string(writes[0].Body))

	for _, tc := range []struct {
		name   string
		data   map[string]any
		detail string
	}{
		{"no text", map[string]any{"words": "x"}, "needs data.text"},
		{"not a string", map[string]any{"text": 42}, "needs data.text"},
		{"empty", map[string]any{"text": "  "}, "empty"},
		{"over the cap", map[string]any{"text": strings.Repeat("é", 41)}, "41 characters, more than send_input_max_chars (40)"},
		{"asks for a run", map[string]any{"text": "go", "run": true}, "run is not accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cmd{typ: "x.openhands.control.send_input", session: conv.ID(), data: tc.data}
			e.send(c)
			ack, _ := e.awaitAck(c)
			assertRejected(t, ack, "invalid", tc.detail)
		})
	}
	assert.Len(t, e.stub.Writes(), 1, "invalid commands are never executed")
	e.verify(conv)
}

func TestControlRESTFailures(t *testing.T) {
	e := startGated(t, gateOn)
	conv := e.conversationIn(oh.StatusRunning)
	for _, tc := range []struct {
		status int
		reason string
		detail string
	}{
		{http.StatusConflict, "refused", "409 Conflict: Conversation already running"},
		{http.StatusNotFound, "refused", "404 Not Found: Not Found"},
		{http.StatusBadRequest, "refused", "400 Bad Request: inactive_service"},
		{http.StatusUnauthorized, "refused", "401 Unauthorized"},
		{http.StatusInternalServerError, "busy", "500 Internal Server Error"},
		{http.StatusServiceUnavailable, "busy", "503 Service Unavailable"},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			details := map[int]string{409: "Conversation already running.", 404: "Not Found", 400: "inactive_service", 401: "Unauthorized"}
			e.stub.SetWriteFault(oh.WriteFault{Status: tc.status, Detail: details[tc.status]})
			pause := &cmd{typ: "control.pause", session: conv.ID()}
			e.send(pause)
			ack, _ := e.awaitAck(pause)
			assertRejected(t, ack, tc.reason, tc.detail)
		})
	}
	// The failed writes dropped their notes: a pause nobody commanded is
	// not linked to any of them.
	e.stub.SetWriteFault(oh.WriteFault{})
	require.NoError(t, conv.Pause())
	e.awaitTypes(conv, "x.openhands.pause.event")
	for _, ev := range e.relayEvents(conv.ID()) {
		if ev.Type == "state.delta" {
			assert.Empty(t, ev.Cause, "a failed command must not claim a later flip")
		}
	}
	e.verify(conv)
}

func TestControlUnreachableServerIsBusy(t *testing.T) {
	e := startGated(t, gateOn)
	conv := e.conversationIn(oh.StatusRunning)
	e.stub.Close() // the collector keeps the last-observed status
	pause := &cmd{typ: "control.pause", session: conv.ID()}
	e.send(pause)
	ack, _ := e.awaitAck(pause)
	assertRejected(t, ack, "busy", "POST /api/conversations/"+conv.ID()+"/pause: ") // refused, or a pooled connection cut off
	assert.NotContains(t, ack.Data["detail"], strings.TrimPrefix(e.stub.URL(), "http://"), "the agent server's address stays in the local log")
	e.settle()
	assert.Empty(t, e.relay.Violations())
}

func TestControlReplyGuardExpiryAcksWillTry(t *testing.T) {
	e := startGated(t, gateOn)
	conv := e.conversationIn(oh.StatusRunning)
	e.stub.SetWriteFault(oh.WriteFault{Delay: 4 * time.Second})
	pause := &cmd{typ: "control.pause", session: conv.ID()}
	start := time.Now()
	e.send(pause)
	ack, _ := e.awaitAck(pause)
	assert.Equal(t, "control.accepted", ack.Type, "guard expiry acks will-try")
	assert.Equal(t, oh.StatusRunning, conv.Status(), "acked before the write landed")
	assert.Less(t, time.Since(start), 4*time.Second)
	// The write lands later; its flip is still the command's outcome.
	delta, _ := e.awaitCaused(pause, "state.delta")
	assert.Greater(t, *delta.Seq, *ack.Seq)
	e.verify(conv)
}

func TestControlDedupe(t *testing.T) {
	e := startGated(t, gateOn)
	conv := e.conversationIn(oh.StatusRunning)
	acks := e.subscribeAcks(conv.ID())

	t.Run("a redelivery gets the recorded ack, byte-identical", func(t *testing.T) {
		c := &cmd{typ: "control.resume", session: conv.ID()} // refused: running
		raw := c.raw(t)
		refusal, err := e.relay.SendCommand(raw)
		require.NoError(t, err)
		require.Nil(t, refusal)
		ack, _ := e.awaitAck(c)
		assertRejected(t, ack, "refused", "")
		first := acks.next(t, c.id)
		refusal, err = e.relay.SendCommand(raw)
		require.NoError(t, err)
		require.Nil(t, refusal)
		assert.Equal(t, string(first), string(acks.next(t, c.id)), "the re-ack is the recorded ack, byte for byte")
	})
	t.Run("duplicates in flight get nothing extra", func(t *testing.T) {
		e.stub.SetWriteFault(oh.WriteFault{Delay: 500 * time.Millisecond})
		defer e.stub.SetWriteFault(oh.WriteFault{})
		c := &cmd{typ: "control.pause", session: conv.ID()}
		raw := c.raw(t)
		writes := len(e.stub.Writes())
		for range 3 {
			refusal, err := e.relay.SendCommand(raw)
			require.NoError(t, err)
			require.Nil(t, refusal)
		}
		e.awaitCaused(c, "state.delta")
		acks.next(t, c.id)
		e.settle()
		acks.none(t, c.id)
		assert.Len(t, e.stub.Writes(), writes+1, "executed once")
	})
	// The re-ack travels the pipeline twice, so the OTLP side holds it
	// twice: verify the relay side only.
	e.settle()
	assert.Empty(t, e.relay.Violations())
	evs := e.relayEvents(conv.ID())
	assertEveryVendorEventOnce(t, evs, conv)
	assertBufferGapFree(t, e.relay, evs)
}

// ackStream is a relay consumer reading the session's acks as delivered,
// redeliveries included.
type ackStream struct {
	lines <-chan []byte
}

func (e *env) subscribeAcks(session string) *ackStream {
	e.t.Helper()
	return &ackStream{lines: e.relay.Subscribe(e.t, "session="+session+"&type=control.accepted&type=control.rejected")}
}

// next returns the next delivered ack, which must answer command.
func (s *ackStream) next(t *testing.T, command string) []byte {
	t.Helper()
	select {
	case raw := <-s.lines:
		ev, err := aep.Parse(raw)
		require.NoError(t, err)
		require.Equal(t, command, ev.Cause)
		return raw
	case <-time.After(waitFor):
		t.Fatalf("no ack for %s within %s", command, waitFor)
		return nil
	}
}

// none checks that no further ack was delivered.
func (s *ackStream) none(t *testing.T, command string) {
	t.Helper()
	select {
	case raw := <-s.lines:
		t.Errorf("an extra ack was delivered for %s: %s", command, raw)
	default:
	}
}
