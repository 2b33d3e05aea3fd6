package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/gorilla/websocket"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// runFloor is the floor process: a bare Go client with one socket per
// conversation on the endpoint the receiver picks on this stub
// (/sockets/session), sending the auth frame, then reading every frame and
// decoding its JSON, nothing else. It prints "ready" once every socket is
// open, then answers "report" with a JSON summary of what arrived since the
// last one, and "peek" with "count N".
func runFloor(ctx context.Context, stubURL, key string, ids []string, in io.Reader, out io.Writer) error {
	base, err := url.Parse(stubURL)
	if err != nil {
		return err
	}
	rec := &recorder{}
	errs := make(chan error, len(ids))
	for _, id := range ids {
		conn, err := oh.DialSocket(ctx, base.Host, oh.EndpointSession, id, key)
		if err != nil {
			return err
		}
		defer conn.Close()
		go func() { errs <- readFloor(conn, rec) }()
	}
	fmt.Fprintln(out, "ready")
	scanner := bufio.NewScanner(in)
	for scanner.Scan() {
		select {
		case err := <-errs:
			return fmt.Errorf("floor socket: %w", err)
		default:
		}
		switch strings.TrimSpace(scanner.Text()) {
		case "report":
			raw, err := json.Marshal(rec.take())
			if err != nil {
				return err
			}
			fmt.Fprintln(out, string(raw))
		case "peek":
			fmt.Fprintln(out, "count", rec.count())
		default:
			fmt.Fprintln(out, "error unknown command")
		}
	}
	return nil
}

// readFloor reads and decodes every frame; an event with a timestamp is an
// arrival.
func readFloor(conn *websocket.Conn, rec *recorder) error {
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return err
		}
		var frame map[string]any
		if err := json.Unmarshal(data, &frame); err != nil {
			return fmt.Errorf("decode frame: %w", err)
		}
		event, _ := frame["event"].(map[string]any)
		kind, _ := event["kind"].(string)
		if ts, ok := event["timestamp"].(string); ok && isToolKind(kind) {
			rec.addVendor(ts)
		}
	}
}

// isToolKind tells the load's tool events from the rest of a history.
func isToolKind(kind string) bool {
	return kind == oh.KindActionEvent || kind == oh.KindObservationEvent
}
