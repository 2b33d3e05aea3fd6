package crashtest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// gateOpen opens the control gate of the collector collectorConfig
// describes; it is merged over it.
const gateOpen = `
extensions:
  openhandscontrol:
    enabled: true
receivers:
  openhands:
    control: openhandscontrol
exporters:
  aeprelay:
    control: openhandscontrol
service:
  extensions: [file_storage, openhandscontrol]
`

// TestKill9Control kills the collector, with storage and the control gate
// open, at the moments a command can be caught in: between its ack and
// the sender's redelivery of it, and between its write and its ack. Each
// redelivery must get the recorded ack byte for byte, and the agent server
// exactly one write per command.
func TestKill9Control(t *testing.T) {
	bin := collectorBinary(t)
	r := newRig(t, setup{socket: "session", queue: noQueue})
	gate := r.writeConfig(t, "gate.yaml", gateOpen)
	conv, err := r.stub.CreateConversation(oh.ConversationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	col := startCollector(t, bin, r.logFile, r.config, gate)
	defer func() { col.stop() }()
	restart := func() {
		col.kill9(t)
		col = startCollector(t, bin, r.logFile, r.config, gate)
	}
	r.awaitOutput(t, conv) // observed, and claimed at the relay
	acks := subscribeAcks(t, r.relay, conv.ID())

	input := renderCommand(t, conv.ID(), "x.openhands.control.send_input", map[string]any{"text": "also run the linter"})
	r.route(t, input)
	recorded := acks.next(t)
	// A later batch: the one a restart re-sends is not the ack's.
	r.awaitOutput(t, conv)
	restart()
	r.awaitOutput(t, conv) // the new connection claims the session
	r.route(t, input)
	if redelivered := acks.next(t); string(redelivered) != string(recorded) {
		t.Errorf("the redelivery got another ack:\n%s\nwant the recorded one, byte for byte:\n%s", redelivered, recorded)
	}
	if writes := r.stub.Writes(); len(writes) != 1 {
		t.Errorf("%d REST writes reached the agent server, want exactly 1", len(writes))
	}

	// Between its write and its ack: the server appends the message at
	// once but holds its answer, and the collector's socket is stalled, so
	// neither tells it the write landed before it dies. After the restart
	// the stream shows the message: the command is acked accepted.
	r.stub.SetWriteFault(oh.WriteFault{AnswerDelay: time.Hour})
	conv.StallSockets()
	input = renderCommand(t, conv.ID(), "x.openhands.control.send_input", map[string]any{"text": "and the tests"})
	r.route(t, input)
	awaitUserMessages(t, conv, 2)
	col.kill9(t)
	r.stub.SetWriteFault(oh.WriteFault{})
	col = startCollector(t, bin, r.logFile, r.config, gate)
	r.awaitOutput(t, conv)
	recorded = acks.next(t)
	if ack, err := aep.Parse(recorded); err != nil || ack.Type != "control.accepted" || ack.Cause != commandID(t, input) {
		t.Fatalf("the stream's ack is %s (%v), want control.accepted of the command in flight", recorded, err)
	}
	r.route(t, input)
	if redelivered := acks.next(t); string(redelivered) != string(recorded) {
		t.Errorf("the redelivery got another ack:\n%s\nwant the recorded one, byte for byte:\n%s", redelivered, recorded)
	}
	if writes := r.stub.Writes(); len(writes) != 2 {
		t.Errorf("%d REST writes reached the agent server, want exactly 2 (one per command)", len(writes))
	}
}

// awaitUserMessages waits until the conversation holds n user messages.
func awaitUserMessages(t *testing.T, conv *oh.Conversation, n int) {
	t.Helper()
	deadline := time.Now().Add(deliveredWithin)
	for {
		count := 0
		for _, ev := range conv.Events() {
			if ev.Kind() == oh.KindMessageEvent && ev["source"] == "user" {
				count++
			}
		}
		if count >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d user messages within %s, want %d", count, deliveredWithin, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func commandID(t *testing.T, raw []byte) string {
	t.Helper()
	ev, err := aep.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return ev.ID
}

// awaitOutput makes the conversation's agent speak and waits until that
// reaches the relay: the collector observes the conversation, and its
// relay connection claims the session (commands are routed to it).
func (r *rig) awaitOutput(t *testing.T, conv *oh.Conversation) {
	t.Helper()
	ev, err := conv.Append(oh.MessageEvent("agent", "working on it"))
	if err != nil {
		t.Fatal(err)
	}
	r.relay.Await(t, "the agent's message at the relay", func(relay *aeprelaytest.Relay) bool {
		return slices.ContainsFunc(relay.Events(), func(rec aeprelaytest.Record) bool {
			return rec.Event.Data["vendor_event_id"] == ev.ID()
		})
	})
}

// renderCommand is a command as an operator's console sends it: every
// delivery of it is these bytes.
func renderCommand(t *testing.T, session, typ string, data map[string]any) []byte {
	t.Helper()
	now := time.Now()
	raw, err := json.Marshal(aep.Event{
		AEP: aep.Version, ID: aep.DeterministicID(now, typ+session+now.String()), Type: typ,
		Time: now.UTC().Format("2006-01-02T15:04:05.000Z"), Source: "aep://ops/agent/mission-control",
		Agent: "mission-control", Session: session, Capture: aep.CaptureRedacted, Data: data,
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// route hands the relay a command, which it must route to the collector.
func (r *rig) route(t *testing.T, raw []byte) {
	t.Helper()
	refusal, err := r.relay.SendCommand(raw)
	if err != nil || refusal != nil {
		t.Fatalf("the relay did not route the command: %v %+v", err, refusal)
	}
}

// ackFeed is a relay consumer of a session's acks, as delivered:
// redeliveries included, each exactly as the collector sent it.
type ackFeed <-chan []byte

func subscribeAcks(t *testing.T, relay *aeprelaytest.Relay, session string) ackFeed {
	t.Helper()
	return relay.Subscribe(t, "session="+session+"&type=control.accepted&type=control.rejected")
}

// next is the next ack delivered.
func (f ackFeed) next(t *testing.T) []byte {
	t.Helper()
	select {
	case raw := <-f:
		return raw
	case <-time.After(deliveredWithin):
		t.Fatalf("no ack within %s", deliveredWithin)
		return nil
	}
}
