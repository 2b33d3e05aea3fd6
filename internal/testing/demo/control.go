package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// operator is the AEP identity the demo's operator sends commands as.
const operator = "aep://ops.example/agent/mission-control"

// controlDemo is `make demo-control`: the collector runs with the control
// gate open, and an operator steers a conversation through the relay,
// approving a pending action, trying an inapplicable resume, pausing and
// resuming. Every command, ack and outcome is printed as it flows.
type controlDemo struct {
	ctx     context.Context
	relay   *aeprelaytest.Relay
	conv    *oh.Conversation
	col     *collectorProcess
	printed int
}

func runControl(ctx context.Context, collectorBin, config string) error {
	return runGated(ctx, collectorBin, config, "Clean up the build", "the control gate is open", (*controlDemo).play)
}

// runGated runs play over one conversation titled title, with the
// collector of config (the gate open, no traces or metrics), and reports
// what reached the relay and the agent server.
func runGated(ctx context.Context, collectorBin, config, title, setting string, play func(*controlDemo) error) (err error) {
	f, err := startFixtures(false)
	if err != nil {
		return err
	}
	defer f.Close()
	agents, relay := f.agents, f.relay
	conv, err := agents.CreateConversation(oh.ConversationOptions{Title: title})
	if err != nil {
		return err
	}
	say("agent server %s, relay %s, conversation %s; %s", agents.URL(), relay.URL(), conv.ID(), setting)
	// The gated configurations export no traces or metrics.
	col, err := startCollector(collectorBin, config, agents.URL(), relay.URL(), "", "")
	if err != nil {
		return err
	}
	defer col.finish(&err)
	say("collector log: %s", col.logPath)
	if err := play(&controlDemo{ctx: ctx, relay: relay, conv: conv, col: col}); err != nil {
		return err
	}
	violations := relay.Violations()
	say("%d AEP events reached the relay; %d protocol or stream violations; %d REST writes reached the agent server",
		len(relay.Events()), len(violations), len(agents.Writes()))
	for _, v := range violations {
		say("violation: %s", v)
	}
	if len(violations) > 0 {
		return errors.New("the relay saw violations")
	}
	return nil
}

func (d *controlDemo) play() error {
	if _, err := d.await("the collector to attach", "state.snapshot", ""); err != nil {
		return err
	}
	say("scenario: the agent wants to delete the build directory; the confirmation policy stops it")
	if _, err := d.conv.SendUserMessage("The build directory is stale; clean it up.", false); err != nil {
		return err
	}
	if err := d.status(oh.StatusRunning); err != nil {
		return err
	}
	action, err := d.conv.Append(oh.ActionEvent(oh.ActionSpec{
		Action: map[string]any{"kind": "TerminalAction", "command": "rm -rf build/"}, SecurityRisk: "HIGH",
	}))
	if err != nil {
		return err
	}
	if err := d.status(oh.StatusWaitingForConfirmation); err != nil {
		return err
	}
	request, err := d.await("the approval request", "attention.requested", "")
	if err != nil {
		return err
	}

	say("operator: approve the pending action")
	approve, err := d.send("control.attention.respond", request.ID, map[string]any{"answer": map[string]any{"option": "approve"}})
	if err != nil {
		return err
	}
	if _, err := d.await("the answer", "attention.resolved", approve); err != nil {
		return err
	}
	if _, err := d.conv.Append(oh.ObservationEvent(action, "removed 214 files", false)); err != nil {
		return err
	}

	say("operator: resume a conversation that is running (the guard refuses it, no write)")
	resume, err := d.send("control.resume", "", nil)
	if err != nil {
		return err
	}
	if _, err := d.awaitAck(resume); err != nil {
		return err
	}

	say("operator: pause the run")
	pause, err := d.send("control.pause", "", nil)
	if err != nil {
		return err
	}
	if _, err := d.await("the pause", "state.delta", pause); err != nil {
		return err
	}

	say("operator: resume it")
	if resume, err = d.send("control.resume", "", nil); err != nil {
		return err
	}
	if _, err := d.await("the resume", "state.delta", resume); err != nil {
		return err
	}

	say("scenario: the agent reports back and finishes")
	if _, err := d.conv.Append(oh.MessageEvent("agent", "Removed the stale build directory.")); err != nil {
		return err
	}
	if err := d.conv.FinishRun(oh.StatusFinished); err != nil {
		return err
	}
	_, err = d.await("run.finished", "run.finished", "")
	return err
}

// status moves the conversation as its agent would, at a pace a person
// can follow.
func (d *controlDemo) status(s string) error {
	time.Sleep(150 * time.Millisecond)
	_, err := d.conv.SetStatus(s)
	return err
}

// send has the relay route one command from the operator to the collector.
func (d *controlDemo) send(typ, subject string, data map[string]any) (string, error) {
	time.Sleep(300 * time.Millisecond)
	id := aep.DeterministicID(time.Now(), typ+subject+time.Now().String())
	capture := aep.CaptureMetadata
	if data != nil {
		capture = aep.CaptureRedacted
	}
	raw, err := json.Marshal(aep.Event{
		AEP: aep.Version, ID: id, Type: typ, Subject: subject, Source: operator, Agent: "mission-control",
		Time: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), Session: d.conv.ID(), Capture: capture, Data: data,
	})
	if err != nil {
		return "", err
	}
	fmt.Printf("operator -> relay   %-34s id=%s %s\n", typ, short(id), payloadOf(data))
	refusal, err := d.relay.SendCommand(raw)
	if err != nil {
		return "", err
	}
	if refusal != nil {
		return "", fmt.Errorf("the relay refused %s: %s %s", typ, refusal.Code, refusal.Detail)
	}
	return id, nil
}

// awaitAck waits for the ack of command.
func (d *controlDemo) awaitAck(command string) (*aep.Event, error) {
	return d.wait("the ack of "+short(command), func(ev *aep.Event) bool {
		return (ev.Type == "control.accepted" || ev.Type == "control.rejected") && ev.Cause == command
	})
}

// await waits for an event of typ, caused by cause unless cause is "".
func (d *controlDemo) await(what, typ, cause string) (*aep.Event, error) {
	return d.wait(what, func(ev *aep.Event) bool { return ev.Type == typ && (cause == "" || ev.Cause == cause) })
}

// wait prints what reaches the relay until an event matches.
func (d *controlDemo) wait(what string, match func(*aep.Event) bool) (*aep.Event, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		evs := d.relay.Events()
		for _, rec := range evs[d.printed:] {
			d.printed++
			ev := rec.Event
			if ev.Seq == nil {
				continue // the operator's own command, printed when sent
			}
			printFlow(ev)
			if ev.Session == d.conv.ID() && match(ev) {
				return ev, nil
			}
		}
		select {
		case <-d.ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", what, d.ctx.Err())
		case <-d.col.Exited():
			return nil, fmt.Errorf("waiting for %s: the collector exited: %v", what, d.col.ExitErr())
		case <-t.C:
		}
	}
}

// printFlow prints an event with what links it to a command.
func printFlow(ev *aep.Event) {
	line := fmt.Sprintf("relay <- seq=%-3d %-34s", *ev.Seq, ev.Type)
	if ev.Cause != "" {
		line += " cause=" + short(ev.Cause)
	}
	switch ev.Type {
	case "control.rejected":
		line += fmt.Sprintf(" reason=%v detail=%q", ev.Data["reason"], ev.Data["detail"])
	case "attention.requested":
		line += fmt.Sprintf(" options=%v respond_via=%v", ev.Data["options"], ev.Data["respond_via"])
	case "attention.answered":
		line += fmt.Sprintf(" answer=%v by=%v", ev.Data["answer"], ev.Data["by"])
	case "attention.resolved":
		line += fmt.Sprintf(" resolution=%v", ev.Data["resolution"])
	case "assessment.guardrail.recorded":
		line += " (the policy engine's own stream)" + guardrailLine(ev)
	}
	fmt.Println(line)
}

func payloadOf(data map[string]any) string {
	if data == nil {
		return ""
	}
	raw, _ := json.Marshal(data)
	return string(raw)
}

// short abbreviates an id to its distinguishing tail.
func short(id string) string {
	if len(id) > 10 {
		return "…" + id[len(id)-8:]
	}
	return id
}
