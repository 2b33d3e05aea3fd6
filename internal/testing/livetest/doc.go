// Package livetest proves the collector against the real
// openhands-agent-server and keeps the stub honest with what it recorded.
//
// The live test (live_test.go, build tag `live`, run by `make live-test`)
// starts the agent server from the pinned virtualenv, a scripted fake LLM
// (internal/testing/fakellm), AEP relays and OTLP sinks, and runs the built
// collector binary in every socket mode. Each receiver reaches the server
// through its own Front, a forward HTTP proxy (the receiver's proxy_url)
// that relays to the server and records every REST exchange and socket
// frame it carries: the only-auth-frames and GET-only assertions read it,
// and `make record` saves it under testdata/recorded/ with the AEP stream
// the receiver emitted.
//
// The control test (control_live_test.go, build tag `live`, also run by
// `make live-test`) runs one more collector with the control gate open and
// drives every verb against the same real server through its relay:
// approve and deny a pending action, pause and resume a running
// conversation, interrupt one, send input to an idle one. Each ack must
// arrive within the declared window, each outcome be cause-linked, each
// guard refuse without a write, and the Front must see no write but the
// five and no socket frame but the auth frame.
//
// The tree test (tree_live_test.go, build tag `live`, also run by `make
// live-test`) runs a collector per socket mode on a conversation whose
// agent starts a child conversation (the fake LLM scripts the
// start_child_conversation call) and on a fork of it the test makes, and
// requires the tree in every receiver's stream: the child's parent, the
// parent's delegation events cause-linked to the launching call, the
// fork's source, and the child's runs under the delegating call's span
// when the stream goes through the aep connector.
//
// The webhook test (webhook_live_test.go, build tag `live`, also run by
// `make live-test`) configures the server's webhooks (OH_WEBHOOKS_0_*) at
// one collector whose receiver has sockets and the webhook sink on and
// polls once an hour, through a pass-through that counts the POSTs: a new
// conversation must be attached by push, a title renamed through the
// server's PATCH become state.delta, and every vendor event, pushed and
// streamed both, be emitted once (relay and OTLP sink).
//
// The replay test (replay_test.go, part of `make test`, no Python) serves
// each recording through a Front again, verbatim, to the receiver at the
// same socket mode and capture level, and requires the AEP stream it
// emitted live, exactly but for what a receiver's start changes (see
// Normalize): the receive time, the epoch, and the ids the epoch-qualified
// source derives, compared by which event names which. Every receiver is
// configured with the same endpoint (Endpoint) and reaches the Front as
// its proxy_url, so the AEP source is the same live and in replay.
// TestRecordThenReplay runs the same loop against the stub agent server,
// so the recorder itself is tested without Python.
package livetest
