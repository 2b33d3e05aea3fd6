// Package openhandstest is a stub of the OpenHands `openhands-agent-server`
// for tests and demos. It speaks the server's real wire protocol (as
// documented in docs/openhands-agent-server.md): session-key auth on REST
// and on both WebSocket endpoints, the legacy `/sockets/events/{id}` socket
// with its full_state-first push and resend modes, the `/sockets/session/{id}`
// envelope socket, conversation and event search with their paging quirks,
// the control endpoints with the real status transitions, and the
// conversation tree (child conversations and forks, tree.go).
//
// There is no agent: tests script what an agent would do through
// [Conversation] (append events, change status, stream deltas) and inject
// faults (malformed frames, dropped sockets, refused connections, broken
// search). Everything a client sends is recorded so tests can assert on it.
package openhandstest
