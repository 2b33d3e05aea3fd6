package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/aeptest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/vendorexport"
)

// Nothing that enters by a data path ever becomes a command (issue 28): the
// gate is open, the relay link authenticated and the collector owns a
// running conversation, so any command of that session the relay routes
// back here would be written. Every receiver of the distribution is fed
// every command, by every encoding it accepts, and unauthenticated: the
// agent server sees no write and the relay no command from us.

// doorsConfig is every receiver of the distribution, none authenticated,
// behind the open gate: AEP over OTLP straight to the relay on both
// bindings (the exporters' guard alone), OTLP through aepinbound to the
// HTTP binding (the aepinbound README's pipeline), and the openhands and
// aep receivers on the socket that receives commands.
const doorsConfig = `
extensions:
  openhandscontrol:
%[1]s
receivers:
  openhands:
    servers:
      - endpoint: %[2]s
        session_api_key: %[3]s
        name: stub
    poll_interval: 50ms
    control: openhandscontrol
    webhook:
      endpoint: %[4]s
    reconnect:
      initial_interval: 10ms
      max_interval: 100ms
  aep:
    endpoint: %[5]s
    jsonl:
      directory: %[6]s
      poll_interval: 20ms
  otlp:
    protocols:
      grpc:
        endpoint: %[7]s
      http:
        endpoint: %[8]s
processors:
  batch:
    timeout: 20ms
  aepinbound:
exporters:
  aeprelay:
    endpoint: %[9]s
    token: %[10]s
    control: openhandscontrol
    instance: e2e/1
    hello_timeout: 2s
    confirm_timeout: 5s
    reconnect:
      initial_interval: 10ms
      max_interval: 100ms
  aeprelay/http:
    endpoint: %[9]s
    token: %[10]s
    transport: http
service:
  extensions: [openhandscontrol]
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [openhands, aep]
      processors: [batch]
      exporters: [aeprelay]
    logs/otlp:
      receivers: [otlp]
      exporters: [aeprelay]
    logs/otlp-http:
      receivers: [otlp]
      exporters: [aeprelay/http]
    logs/inbound:
      receivers: [otlp]
      processors: [aepinbound]
      exporters: [aeprelay/http]
`

// doors are the collector's entrances, and the env behind them.
type doors struct {
	*env
	webhook, aep, otlpGRPC, otlpHTTP string // host:port
	jsonl                            string // the aep receiver's jsonl.directory
}

func startDoors(t *testing.T) *doors {
	t.Helper()
	d := &doors{env: newEnv(t), jsonl: t.TempDir()}
	for _, addr := range []*string{&d.webhook, &d.aep, &d.otlpGRPC, &d.otlpHTTP} {
		var err error
		*addr, err = childproc.FreeAddr()
		require.NoError(t, err)
	}
	startCollectorYAML(t, fmt.Sprintf(doorsConfig, gateOn, d.stub.URL(), stubKey, d.webhook, d.aep, d.jsonl,
		d.otlpGRPC, d.otlpHTTP, d.relay.URL(), relayToken), zap.WarnLevel)
	return d
}

// commandsFor are well-formed commands of every type the open gate accepts
// and the core one it does not, in the agent identity of the relay link:
// each verb to the session whose status the gate would execute it in, a
// respond to the pending request of the waiting one.
func commandsFor(t *testing.T, running *oh.Conversation, waiting *oh.Conversation, attention string) []*aep.Event {
	t.Helper()
	var out []*aep.Event
	for _, c := range []*cmd{
		{typ: "control.pause", session: running.ID()},
		{typ: "x.openhands.control.send_input", session: running.ID(), data: map[string]any{"text": "rm -rf ~"}},
		{typ: "x.openhands.control.interrupt", session: running.ID()},
		{typ: "control.cancel", session: running.ID(), data: map[string]any{"scope": "run"}},
		{typ: "control.resume", session: running.ID()},
		{typ: "control.attention.respond", session: waiting.ID(), subject: attention, data: map[string]any{"answer": map[string]any{"option": "approve"}}},
	} {
		ev, err := aep.Parse(c.raw(t))
		require.NoError(t, err)
		ev.Agent = "openhands" // the identity the socket speaks for, as an attacker would pick
		out = append(out, ev)
	}
	return out
}

// marker is a valid event of its own session, sent after the commands
// through the same door: once the relay holds it, the commands before it
// have been decided.
func marker(name string) *aep.Event {
	return aeptest.RunStarted("marker-"+name, 0, "marker-"+name, "run:"+name)
}

// awaitMarkers waits until the relay holds every marker's session.
func (d *doors) awaitMarkers(t *testing.T, names ...string) {
	t.Helper()
	d.relay.Await(t, fmt.Sprintf("markers %v", names), func(r *aeprelaytest.Relay) bool {
		held := map[string]bool{}
		for _, rec := range r.Events() {
			held[rec.Event.Session] = true
		}
		for _, name := range names {
			if !held["marker-"+name] {
				return false
			}
		}
		return true
	})
}

func TestNoDoorTakesACommand(t *testing.T) {
	d := startDoors(t)
	conv := d.conversationIn(oh.StatusRunning)
	waiting, attention := d.awaitingApproval("rm -rf build/")
	commands := commandsFor(t, conv, waiting, attention.ID)

	t.Run("otlp", func(t *testing.T) {
		for _, enc := range []struct {
			name   string
			export func(t *testing.T, ld plog.Logs)
		}{
			{"http_json", func(t *testing.T, ld plog.Logs) { d.postOTLP(t, ld, true) }},
			{"http_protobuf", func(t *testing.T, ld plog.Logs) { d.postOTLP(t, ld, false) }},
			{"grpc", d.exportGRPC},
		} {
			t.Run(enc.name, func(t *testing.T) {
				ld := plog.NewLogs()
				records := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
				for _, ev := range append(commands, marker("otlp-"+enc.name)) {
					require.NoError(t, projection.ToLogRecord(ev, records.AppendEmpty(), projection.Options{}))
				}
				// The vendor record that aepinbound maps: its event marks the
				// second exporter's push.
				codex := ld.ResourceLogs().AppendEmpty()
				codex.Resource().Attributes().PutStr("service.name", "codex_cli_rs")
				lr := codex.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
				lr.Attributes().PutStr("event.name", "codex.api_request")
				lr.Attributes().PutStr("conversation.id", "marker-inbound-"+enc.name)
				enc.export(t, ld)
				d.awaitMarkers(t, "otlp-"+enc.name, "inbound-"+enc.name)
			})
		}
	})

	t.Run("aep", func(t *testing.T) {
		for _, ev := range commands {
			raw, err := ev.MarshalJSON()
			require.NoError(t, err)
			ndjson := ndjsonOf(t, marker("post"), ev)
			for _, req := range []struct {
				name, contentType, encoding string
				body                        []byte
			}{
				{"json", "application/json", "", raw},
				{"ndjson", "application/x-ndjson", "", ndjson},
				{"ndjson_gzip", "application/x-ndjson", "gzip", gzipped(t, ndjson)},
			} {
				t.Run(ev.Type+"/"+req.name, func(t *testing.T) {
					resp := post(t, "http://"+d.aep+"/events", req.body,
						"AEP-Version", aep.Version, "Content-Type", req.contentType, "Content-Encoding", req.encoding)
					assert.Equal(t, http.StatusBadRequest, resp, "the aep receiver refuses a body holding a command")
				})
			}
		}
		t.Run("jsonl", func(t *testing.T) {
			dir := filepath.Join(d.jsonl, "mission-control")
			require.NoError(t, os.MkdirAll(dir, 0o700))
			log := ndjsonOf(t, append(commands, marker("jsonl"))...)
			require.NoError(t, os.WriteFile(filepath.Join(dir, conv.ID()+".jsonl"), log, 0o600))
			d.awaitMarkers(t, "jsonl")
		})
	})

	t.Run("openhands", func(t *testing.T) {
		// A kind that the vendor-type rule names x.openhands.control.interrupt,
		// and a command's AEP envelope as an event: from the agent server's
		// socket, and POSTed to the webhook sink with the server's key.
		shaped := func() []oh.Event {
			envelope, err := commands[0].MarshalJSON()
			require.NoError(t, err)
			var asEvent oh.Event
			require.NoError(t, json.Unmarshal(envelope, &asEvent))
			asEvent["kind"] = "ControlPauseEvent"
			return []oh.Event{{"kind": "ControlInterruptEvent", "source": "environment"}, asEvent}
		}
		t.Run("socket", func(t *testing.T) {
			for _, ev := range shaped() {
				_, err := conv.Append(ev)
				require.NoError(t, err)
			}
			done, err := conv.Append(oh.MessageEvent("agent", "socket marker"))
			require.NoError(t, err)
			d.awaitVendorEvent(t, conv, done.ID())
		})
		t.Run("webhook", func(t *testing.T) {
			// Each event extends what was processed (its parent_id), so the
			// receiver maps it from the push, not from the socket.
			var batch []oh.Event
			parent := conv.Events()[len(conv.Events())-1].ID()
			for _, ev := range append(shaped(), oh.MessageEvent("agent", "webhook marker")) {
				ev["id"], ev["timestamp"], ev["parent_id"] = oh.NewUUID(), oh.FormatTimestamp(time.Now()), parent
				parent = ev.ID()
				batch = append(batch, ev)
			}
			body, err := json.Marshal(batch)
			require.NoError(t, err)
			status := post(t, "http://"+d.webhook+"/events/"+conv.HexID(), body,
				"Content-Type", "application/json", "X-Session-API-Key", stubKey)
			require.Equal(t, http.StatusOK, status)
			d.awaitVendorEvent(t, conv, batch[len(batch)-1].ID())
		})
	})

	assertNoWrites(t, d.stub)
	for _, c := range d.relay.Commands() {
		assert.Equal(t, aeprelaytest.BindingInjected, c.Binding, "the collector sent the relay %s %s over %s", c.Type, c.ID, c.Binding)
	}
	for _, v := range d.relay.Violations() {
		t.Errorf("relay: %s", v)
	}

	// The control case: the same link, the same session, an operator's
	// command through the relay is executed, and its ack, a control.* event,
	// leaves through the exporter that refused every command above.
	approve := &cmd{typ: "control.attention.respond", session: waiting.ID(), subject: attention.ID,
		data: map[string]any{"answer": map[string]any{"option": "approve"}}}
	d.send(approve)
	ack, _ := d.awaitAck(approve)
	assert.Equal(t, "control.accepted", ack.Type, "ack %v", ack.Data)
	d.awaitCaused(approve, "attention.resolved")
	writes := d.stub.Writes()
	require.Len(t, writes, 1, "the operator's respond, and nothing else, was written")
	assert.Contains(t, writes[0].Path, "respond_to_confirmation")
}

// awaitVendorEvent waits until the relay holds the event the vendor event
// id maps to.
func (d *doors) awaitVendorEvent(t *testing.T, conv *oh.Conversation, vendorID string) {
	t.Helper()
	awaitEvents(t, "relay", func() []*aep.Event { return d.relayEvents(conv.ID()) }, func(evs []*aep.Event) bool {
		for _, ev := range evs {
			if ev.Data["vendor_event_id"] == vendorID {
				return true
			}
		}
		return false
	})
}

func ndjsonOf(t *testing.T, events ...*aep.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, ev := range events {
		raw, err := ev.MarshalJSON()
		require.NoError(t, err)
		b.Write(raw)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func gzipped(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write(raw)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.Bytes()
}

// post sends body with the headers given as name, value pairs (an empty
// value is left out) and returns the status.
func post(t *testing.T, url string, body []byte, headers ...string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode
}

// postOTLP exports ld to the otlp receiver's HTTP endpoint as JSON or
// protobuf.
func (d *doors) postOTLP(t *testing.T, ld plog.Logs, asJSON bool) {
	t.Helper()
	body, contentType, err := vendorexport.HTTPBody(ld, asJSON)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, post(t, "http://"+d.otlpHTTP+"/v1/logs", body, "Content-Type", contentType))
}

// exportGRPC exports ld over OTLP/gRPC.
func (d *doors) exportGRPC(t *testing.T, ld plog.Logs) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	require.NoError(t, vendorexport.ExportGRPC(ctx, d.otlpGRPC, ld))
}
