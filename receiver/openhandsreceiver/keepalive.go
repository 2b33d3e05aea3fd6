package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The bounds a conversation socket is read under. None is a config key: a
// healthy socket is far inside each, and each only decides how soon a dead
// one is noticed.
const (
	// pingInterval is how often an attached socket is pinged. The agent
	// server (uvicorn with wsproto) answers each ping with a pong, so a
	// socket that delivers nothing, not even a pong, for pingInterval +
	// pongWait is dead whatever TCP says: a stuck proxy, a NAT that forgot
	// the flow.
	pingInterval = 30 * time.Second
	pongWait     = 15 * time.Second
	// frameGrace and minFrameRate bound one message once its header is in:
	// frameGrace, plus its bytes so far at minFrameRate. A header announcing
	// a megabyte followed by a trickle is cut; a 16 MiB frame over a slow
	// link (256 kbit/s) is not.
	frameGrace   = 30 * time.Second
	minFrameRate = 32 << 10 // bytes per second
	// deadlineStep is how many bytes of a message extend its deadline at
	// once, so a large frame moves its deadline every few reads, not each.
	deadlineStep = 64 << 10
	// behindSearchWait is how long search may show a conversation move
	// (updated_at, execution_status) while its socket delivers no stored
	// event before the socket is recycled: a healthy socket delivers an
	// event within milliseconds of the change search shows.
	behindSearchWait = time.Minute
)

// frameBytesInFlight is the receiver's frame budget (frameBudget): the
// frame bytes all its conversation sockets may hold at once, four frames
// of 16 MiB.
const frameBytesInFlight = 64 << 20

// socketSettings are the bounds above, per receiver (tests shorten them),
// and the frame budget its sockets share.
type socketSettings struct {
	pingInterval, pongWait time.Duration
	frameGrace             time.Duration
	minFrameRate           int64
	behindSearch           time.Duration
	frames                 *frameBudget
}

var defaultSocketSettings = socketSettings{
	pingInterval: pingInterval,
	pongWait:     pongWait,
	frameGrace:   frameGrace,
	minFrameRate: minFrameRate,
	behindSearch: behindSearchWait,
}

// Why a socket that still looked open was dropped (otelcol_openhands_socket_stalls).
var (
	errKeepalive    = errors.New("socket stalled: no pong or frame within the keepalive window")
	errFrameStalled = errors.New("socket stalled: a frame was not received in time")
	errBehindSearch = errors.New("socket stalled: search shows the conversation moving past what the socket delivered")
)

// stallCause is the metric cause of a stall error, "" for any other.
func stallCause(err error) string {
	switch {
	case errors.Is(err, errKeepalive):
		return "keepalive"
	case errors.Is(err, errFrameStalled):
		return "frame"
	case errors.Is(err, errBehindSearch):
		return "behind_search"
	}
	return ""
}

// frameReader reads a conversation socket's text frames, at most limit
// bytes each, and keeps its read deadline: between messages the
// keepalive's (a frame or pong within pingInterval + pongWait), within one
// the message's own, unless the message is already received whole. One
// goroutine reads; the pong handler runs on it.
type frameReader struct {
	conn      *websocket.Conn
	fc        *frameConn // the connection under conn; nil where there is none
	limit     int64
	settings  socketSettings
	inMessage bool
	// awaitedAt is when the keepalive's deadline was set, zero while a
	// message's own deadline stands instead.
	awaitedAt time.Time
}

func newFrameReader(conn *websocket.Conn, limit int64, settings socketSettings) *frameReader {
	fc, _ := conn.NetConn().(*frameConn)
	r := &frameReader{conn: conn, fc: fc, limit: limit, settings: settings}
	conn.SetPongHandler(func(string) error {
		if r.inMessage {
			return nil // between fragments of a message: its own deadline holds
		}
		return r.awaitMessage()
	})
	return r
}

// awaitMessage puts the keepalive's deadline in force. One set less than
// keepaliveSlack of the window ago stands: it falls due at most that much
// early, and a socket delivering frames every few milliseconds does not
// move its timer for each.
func (r *frameReader) awaitMessage() error {
	r.inMessage = false
	window := r.settings.pingInterval + r.settings.pongWait
	now := time.Now()
	if !r.awaitedAt.IsZero() && now.Sub(r.awaitedAt) < window/keepaliveSlack {
		return nil
	}
	if err := r.conn.SetReadDeadline(now.Add(window)); err != nil {
		return err
	}
	r.awaitedAt = now
	return nil
}

// keepaliveSlack divides the keepalive's window into the part by which a
// standing deadline may fall due early.
const keepaliveSlack = 16

// read reads the next text frame into buf's storage, which the frame
// returned then shares: a caller done with each frame before the next
// reads every frame into the same few bytes. It enforces the limit itself
// rather than through the connection's read limit, which would write a
// close frame.
func (r *frameReader) read(buf []byte) ([]byte, error) {
	for {
		if err := r.awaitMessage(); err != nil {
			return nil, err
		}
		kind, message, err := r.conn.NextReader()
		if err != nil {
			return nil, r.classify(err)
		}
		if kind != websocket.TextMessage {
			continue // the server sends JSON text frames only
		}
		r.inMessage = true
		// A message received whole is read without waiting: the
		// keepalive's deadline may stand.
		timed := !r.fc.messageReceived()
		var start time.Time
		covered := 0
		if timed {
			start = time.Now()
			if err := r.conn.SetReadDeadline(start.Add(r.settings.frameGrace)); err != nil {
				return nil, err
			}
			r.awaitedAt = time.Time{}
		}
		data := buf[:0]
		for {
			if len(data) == cap(data) {
				data = slices.Grow(data, 512) // room to read into, as io.ReadAll makes
			}
			n, err := message.Read(data[len(data):min(int64(cap(data)), r.limit+1)])
			data = data[:len(data)+n]
			switch {
			case int64(len(data)) > r.limit:
				return nil, fmt.Errorf("%w: over max_frame_bytes (%d)", errFrameTooLarge, r.limit)
			case err == io.EOF:
				return data, nil
			case err != nil:
				return nil, r.classify(err)
			case timed && len(data)-covered >= deadlineStep:
				covered = len(data)
				due := start.Add(r.settings.frameGrace + time.Duration(int64(covered)*int64(time.Second)/r.settings.minFrameRate))
				if err := r.conn.SetReadDeadline(due); err != nil {
					return nil, err
				}
			}
		}
	}
}

// classify names a read deadline that passed (gorilla reports it as a
// net.Error that times out, not os.ErrDeadlineExceeded): the keepalive's
// between messages, the message's within one.
func (r *frameReader) classify(err error) error {
	var ne net.Error
	switch {
	case !errors.As(err, &ne) || !ne.Timeout():
		return classifyClose(err)
	case r.inMessage:
		return fmt.Errorf("%w (%s plus its bytes at %d B/s): %w", errFrameStalled, r.settings.frameGrace, r.settings.minFrameRate, err)
	default:
		return fmt.Errorf("%w (%s): %w", errKeepalive, r.settings.pingInterval+r.settings.pongWait, err)
	}
}

// keepAlive pings conn every pingInterval until it fails or stop is
// called. Pings and the pongs that answer a server's pings are control
// frames: the auth frame stays the only data frame the receiver writes.
func keepAlive(conn *websocket.Conn, settings socketSettings) (stop func()) {
	return every(settings.pingInterval, func() bool {
		return conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(settings.pongWait)) == nil
	})
}

// socketCut closes a socket from another goroutine and keeps why, so that
// the read failing on it reports that rather than a closed connection.
type socketCut struct {
	conn *websocket.Conn
	why  atomic.Pointer[error]
}

func (s *socketCut) close(why error) {
	s.why.CompareAndSwap(nil, &why)
	s.conn.Close()
}

// reason is why the socket was cut, nil if it was not.
func (s *socketCut) reason() error {
	if why := s.why.Load(); why != nil {
		return *why
	}
	return nil
}
