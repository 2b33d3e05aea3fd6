// Package aeprelaytest is a real AEP 0.1 relay for tests and demos, written
// from AEP-0003 (bindings), AEP-0004 (command routing) and the reference
// relay's documented behaviour. It listens on loopback, validates every
// Event it ingests (package schema, then package stream), and records what
// it saw so that tests can assert on it.
//
// Bindings (AEP-0003):
//
//   - POST /events: one Event (application/json) or a batch
//     (application/x-ndjson, order preserved, rejected whole on the first
//     invalid line). AEP-Version 0.1 required (426), bearer auth (401),
//     limits (413 payload-too-large before the body is read, 413
//     too-many-events with nothing ingested), 415 on other content types.
//   - GET /events and /.well-known/aep: the discovery document.
//   - GET /healthz: unauthenticated {"ok":true}; counts when authorized.
//   - GET /stream: SSE. Filter `filter` (attr-match JSON, §6) and, as
//     shorthand, repeatable `session`, `type` (with `p.*` patterns), `agent`,
//     `source`, `run` and `subject` parameters ANDed with it; `capture`
//     ceiling; `from` (JSON array of {session, epoch, seq} or "all") or
//     Last-Event-ID `{session}:{epoch}:{seq}`; `live=0` ends after replay.
//     A resume point older than the buffer gets `: replay-exhausted
//     {session} {epoch}:{seq}` first. `: ping` heartbeats.
//   - /socket: the duplex binding. hello first both ways (hello-required,
//     version-unsupported), ping/pong, closing, subscribe / subscribed /
//     unsubscribe / unsubscribed with filter, from and capture, roster,
//     unknown frame types ignored, binary frames refused (error
//     "binary-frame", close 1003).
//
// Ingest is one function for every binding, as in the reference relay:
// commands (control.* except the acks, and x.*.control.*) are routed to
// the one live connection that claims the addressed session; agent.*
// Events fan out live only; everything else is buffered per (source,
// session) — admission dedupe on (source, id), insert-sorted by (epoch,
// seq), trimmed oldest-first, least-recently-written session evicted — and
// fanned out as received, byte-identical redeliveries included.
//
// Behaviour the spec leaves open, as chosen here:
//
//   - An invalid Event on the socket is refused as the reference relay
//     does, with {"type":"error","code":"invalid-event","cause":<its
//     id>,"detail":…}; the connection stays open. Config.Refuse plays a
//     relay whose policy is stricter than the schema.
//   - A claim is made by a socket connection carrying a session-scoped
//     Event for a session; it ends with the connection, when the
//     connection sends `closing`, or when session.ended for that (source,
//     session) is ingested.
//   - Commands POSTed over HTTP are routed like socket ones; a refusal has
//     no connection to go to and is only recorded (see [Relay.Commands]).
//   - Multi-line JSON bodies are compacted so that every binding carries
//     the Event on one line; single-line Events travel byte-identically.
//   - An Event matching several subscriptions of one connection is sent
//     once, at the widest of their capture ceilings.
//
// Test hooks: [Start] (closed by the test's cleanup), [Relay.Events],
// [Relay.Received], [Relay.SessionEvents], [Relay.Sessions],
// [Relay.Violations], [Relay.Hellos], [Relay.Frames], [Relay.Commands],
// [Relay.Connections], [Relay.Subscribers], [Relay.WaitFor] and
// [Relay.Await]; faults with
// [Relay.SetPong], [Relay.SetDown], [Relay.SetToken],
// [Relay.DropConnections] and
// [Relay.Restart]; [Relay.SendCommand] and [Relay.SendFrame] to play a
// sender.
package aeprelaytest
