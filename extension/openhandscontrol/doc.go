// Package openhandscontrol is the opt-in control gate of the
// otelcol-openhands distribution: the hub between the aeprelay exporter,
// which receives AEP-0004 commands on the relay socket, and the openhands
// receiver, which owns each conversation's sequence, its last-observed
// status and the agent server it lives on.
//
// Off (the default) it declares accepts: [] and writes nothing, so the
// only data frame the distribution ever sends an agent server is the
// socket's auth frame (control frames aside: keepalive pings and pongs).
// On, it accepts exactly five commands over an authenticated relay link
// and turns each into one REST write (writeAgentServer), one at a time per
// conversation, when exactly one observed conversation owns the session
// and the design record's guards pass against the receiver's
// last-observed status (and, with the receiver's storage, once the
// command's note is stored, so that a restart can still decide it); acks
// and outcomes are ordinary sequenced events of the conversation's
// session, emitted through the receiver.
package openhandscontrol // import "github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
