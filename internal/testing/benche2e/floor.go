package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// runFloor is the floor process: a bare Go client with one socket per
// conversation on the endpoint the receiver picks on this stub
// (/sockets/session), sending the auth frame, then reading every frame and
// decoding its JSON, nothing else. It prints "ready" once every socket is
// open, then answers "report" with a JSON summary of what arrived since the
// last one, and "peek" with "count N".
//
// With handoff > 0 each decoded frame is also handed to one goroutine that
// gathers frames into a batch it drops every handoff, as the batch
// processor gathers and flushes: the least a collector pipeline, whose
// reading goroutine hands each frame's records to a batching one, adds to
// the bare floor.
func runFloor(ctx context.Context, stubURL, key string, ids []string, handoff time.Duration, in io.Reader, out io.Writer) error {
	base, err := url.Parse(stubURL)
	if err != nil {
		return err
	}
	rec := &recorder{}
	var frames chan map[string]any
	if handoff > 0 {
		frames = make(chan map[string]any, runtime.NumCPU()) // the batch processor's channel
		go gatherFrames(frames, handoff)
	}
	errs := make(chan error, len(ids))
	for _, id := range ids {
		conn, err := oh.DialSocket(ctx, base.Host, oh.EndpointSession, id, key)
		if err != nil {
			return err
		}
		defer conn.Close()
		go func() { errs <- readFloor(conn, rec, frames) }()
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

// gatherFrames batches what frames hands it and drops the batch every
// flush.
func gatherFrames(frames <-chan map[string]any, flush time.Duration) {
	ticker := time.NewTicker(flush)
	defer ticker.Stop()
	var batch []map[string]any
	for {
		select {
		case frame := <-frames:
			batch = append(batch, frame)
		case <-ticker.C:
			clear(batch)
			batch = batch[:0]
		}
	}
}

// readFloor reads and decodes every frame, and hands it to frames when
// that is not nil; an event with a timestamp is an arrival.
func readFloor(conn *websocket.Conn, rec *recorder, frames chan<- map[string]any) error {
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return err
		}
		var frame map[string]any
		if err := json.Unmarshal(data, &frame); err != nil {
			return fmt.Errorf("decode frame: %w", err)
		}
		if frames != nil {
			frames <- frame
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
