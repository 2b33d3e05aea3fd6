package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
)

const (
	// livenessIntervals: a connection silent for this many ping intervals
	// is dead (AEP-0003 §2.5 recommends 30 s pings and a 90 s timeout).
	livenessIntervals = 3
	// closeGrace bounds the orderly close at shutdown.
	closeGrace = time.Second
)

// errRelayClosing ends a connection whose relay sent `closing`.
var errRelayClosing = errors.New("relay announced closing")

// run is a link's connection manager: it owns the link's every dial and
// every read.
func (s *socketTransport) run(ctx context.Context, l *relayLink) {
	defer close(l.done)
	attempt := 0
	for {
		conn, err := s.connect(ctx, l)
		if err == nil {
			attempt = 0
			s.serve(ctx, l, conn)
			err = conn.cause()
		}
		if ctx.Err() != nil {
			return
		}
		// Status first: a push woken by setState may already look at it.
		if consumererror.IsPermanent(err) {
			s.status.permanentError(err)
			s.logger.Error("AEP relay refused this exporter for good; no more dials until the collector restarts",
				zap.String("relay", s.relay.display), zap.String("agent", l.agent), zap.Error(err))
			l.setState(nil, err)
			s.refuseForGood(err)
			return
		}
		s.status.recoverable(err)
		l.setState(nil, err)
		if !s.status.credentialsRefused(ctx, err) {
			s.rate.Warn("redial", "AEP relay connection unavailable; redialling with backoff",
				zap.String("relay", s.relay.display), zap.String("agent", l.agent), zap.Int("attempt", attempt+1), zap.Error(err))
		}
		if s.cfg.Reconnect.Sleep(ctx, attempt) != nil {
			return
		}
		attempt++
		s.tel.reconnects.Add(ctx, 1)
	}
}

// serve runs one connection until it fails or the link closes.
func (s *socketTransport) serve(ctx context.Context, l *relayLink, conn *relayConn) {
	s.status.ok()
	l.setState(conn, nil)
	s.logger.Info("connected to the AEP relay", zap.String("relay", s.relay.display), zap.String("agent", l.agent), zap.String("instance", s.instance))
	connCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.keepalive(connCtx, conn)
	}()
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			conn.closeOrderly(closeGrace, errShutDown)
		case <-conn.closed:
		}
	}()
	s.read(connCtx, l, conn)
	cancel()
	wg.Wait()
}

// read handles every inbound frame; a connection silent for
// livenessIntervals pings is dropped.
func (s *socketTransport) read(ctx context.Context, l *relayLink, conn *relayConn) {
	liveness := livenessIntervals * s.cfg.PingInterval
	for {
		if err := conn.ws.SetReadDeadline(time.Now().Add(liveness)); err != nil {
			conn.fail(err)
			return
		}
		kind, raw, err := conn.ws.ReadMessage()
		if err != nil {
			conn.fail(fmt.Errorf("read from the AEP relay: %w", err))
			return
		}
		if kind != websocket.TextMessage {
			s.rate.Warn("binary_frame", "ignoring a binary frame from the AEP relay (reserved in AEP 0.1)")
			continue
		}
		if err := s.handleFrame(ctx, l, conn, raw); err != nil {
			conn.fail(err)
			return
		}
	}
}

// handleFrame acts on one inbound frame; an error ends the connection.
func (s *socketTransport) handleFrame(ctx context.Context, l *relayLink, conn *relayConn, raw []byte) error {
	f, err := parseFrame(raw)
	if err != nil {
		s.rate.Warn("bad_frame", "ignoring an undecodable frame from the AEP relay", zap.Error(err))
		return nil
	}
	if f.isEvent() {
		s.handleEvent(ctx, l, f.Type, raw)
		return nil
	}
	switch f.Type {
	case framePing:
		if err := conn.writeJSON(time.Now().Add(s.cfg.ConfirmTimeout), pingFrame{Type: framePong, T: f.T}); err != nil {
			return fmt.Errorf("answer the AEP relay's ping: %w", err)
		}
	case framePong:
		conn.resolvePong(pingToken(f.T))
	case frameError:
		return s.handleError(ctx, conn, f)
	case frameClosing:
		s.logger.Info("AEP relay is closing the connection; redialling", zap.String("relay", s.relay.display), zap.String("agent", l.agent), zap.String("reason", f.Reason))
		return errRelayClosing
	}
	// Repeated hellos and unknown frame types are ignored (AEP-0003 §2.2).
	return nil
}

// handleError acts on an error frame. One whose cause names an event of
// an unconfirmed batch refuses that event. Relay-behalf refusals of
// commands go to the command's sender, never to the emitter (AEP-0004
// §4.2), so any other cause matches nothing of ours. Connection-level codes
// that no redial can cure end the connection for good.
func (s *socketTransport) handleError(ctx context.Context, conn *relayConn, f inboundFrame) error {
	if f.Cause != "" {
		if !conn.refuse(f.Cause, relayRefusal{code: f.Code, detail: f.detailText()}) {
			s.tel.unmatchedError(ctx, f.Code)
			s.logger.Debug("AEP relay sent an error frame whose cause is none of our unconfirmed events",
				zap.String("cause", f.Cause), zap.String("code", f.Code), zap.String("detail", f.detailText()))
		}
		return nil
	}
	rerr := &relayError{code: f.Code, detail: f.detailText(), versions: f.Versions}
	if rerr.fatal() {
		return consumererror.NewPermanent(rerr)
	}
	s.rate.Warn("error_"+f.Code, "AEP relay reported an error", zap.String("id", f.ID), zap.Error(rerr))
	return nil
}

// handleEvent hands a command that arrived on the agent's link to the
// control extension; the relay sends an emitter nothing else.
func (s *socketTransport) handleEvent(ctx context.Context, l *relayLink, eventType string, raw []byte) {
	if !aep.IsCommand(eventType) {
		s.logger.Debug("ignoring an event the AEP relay sent to an emitter", zap.String("type", eventType))
		return
	}
	ev, err := aep.Parse(raw)
	if err != nil {
		s.tel.command(ctx, commandInvalid)
		s.rate.Warn("bad_command", "ignoring an undecodable command from the AEP relay", zap.String("type", eventType), zap.Error(err))
		return
	}
	switch {
	case l.agent != s.cfg.Agent:
		s.tel.command(ctx, commandUnhandled)
		s.rate.Warn("command_other_agent", "received a command on the link of another agent, which declares accepts: []; commands reach only the link of agent",
			zap.String("link_agent", l.agent), zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("session", ev.Session))
	case l.control == nil:
		s.tel.command(ctx, commandUnhandled)
		s.rate.Info("command_unhandled", "received a command but no control extension is configured; the relay refuses commands on our behalf (accepts: [])",
			zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("session", ev.Session))
	default:
		s.tel.command(ctx, commandHandled)
		l.control.HandleCommand(ctx, raw, ev)
	}
}

// keepalive pings an otherwise idle relay so that both ends see a live
// connection; its pongs only refresh the read deadline.
func (s *socketTransport) keepalive(ctx context.Context, conn *relayConn) {
	ticker := time.NewTicker(s.cfg.PingInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			token, _ := s.nextPing()
			if err := conn.writeJSON(time.Now().Add(s.cfg.ConfirmTimeout), pingFrame{Type: framePing, T: token}); err != nil {
				conn.fail(fmt.Errorf("ping the AEP relay: %w", err))
				return
			}
		}
	}
}
