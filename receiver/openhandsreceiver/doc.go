// Package openhandsreceiver observes OpenHands agent servers: it discovers
// their conversations, attaches one read-only WebSocket per conversation,
// maps every server event to AEP 0.1 and emits each AEP event as an OTel log
// record (the AEP-0005 §3 projection).
//
// The receiver never drives a conversation: the socket's first-message auth
// frame is the only data frame it writes (control frames aside: keepalive
// pings, and pongs), and its REST calls are GETs.
package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"
