package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// runGovern is `make demo-govern`: the aeppolicy processor watches a run
// whose wall time crosses its session budget: a notice, then the hard
// breach, which pauses the conversation through the open gate as a
// command the collector originates (acked with the breach as cause); the
// operator resumes it through the relay, and the agent finishes.
func runGovern(ctx context.Context, collectorBin, config string) (err error) {
	f, err := startFixtures(false)
	if err != nil {
		return err
	}
	defer f.Close()
	agents, relay := f.agents, f.relay
	conv, err := agents.CreateConversation(oh.ConversationOptions{Title: "Run the slow test suite"})
	if err != nil {
		return err
	}
	say("agent server %s, relay %s, conversation %s; a session's runs may run 1.5s (notice) and 3s (pause)", agents.URL(), relay.URL(), conv.ID())
	col, err := startCollector(collectorBin, config, agents.URL(), relay.URL(), "", "")
	if err != nil {
		return err
	}
	defer col.finish(&err)
	say("collector log: %s", col.logPath)
	d := &controlDemo{ctx: ctx, relay: relay, conv: conv, col: col}
	if _, err := d.await("the collector to attach", "state.snapshot", ""); err != nil {
		return err
	}
	say("scenario: the agent starts a run and keeps working past its budget")
	if _, err := conv.SendUserMessage("Run the whole test suite.", false); err != nil {
		return err
	}
	if err := d.status(oh.StatusRunning); err != nil {
		return err
	}
	if _, err := conv.Append(oh.TerminalAction("go test ./...")); err != nil {
		return err
	}
	if _, err := d.wait("the notice", isGuardrail("soft")); err != nil {
		return err
	}
	hard, err := d.wait("the hard breach", isGuardrail("hard"))
	if err != nil {
		return err
	}
	say("collector: the hard breach pauses the conversation, a command of its own with the breach's id")
	if _, err := d.await("the pause", "state.delta", hard.ID); err != nil {
		return err
	}
	say("operator: resume it")
	resume, err := d.send("control.resume", "", nil)
	if err != nil {
		return err
	}
	if _, err := d.await("the resume", "state.delta", resume); err != nil {
		return err
	}
	say("scenario: the agent finishes")
	if err := conv.FinishRun(oh.StatusFinished); err != nil {
		return err
	}
	if _, err := d.await("run.finished", "run.finished", ""); err != nil {
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

// isGuardrail matches a guardrail event whose second category is the
// level's threshold.
func isGuardrail(level string) func(*aep.Event) bool {
	return func(ev *aep.Event) bool {
		return ev.Type == "assessment.guardrail.recorded" && categoryName(ev, 1) == "threshold."+level
	}
}

func categoryName(ev *aep.Event, i int) string {
	g, _ := ev.Data["guardrail"].(map[string]any)
	cats, _ := g["categories"].([]any)
	if len(cats) <= i {
		return ""
	}
	c, _ := cats[i].(map[string]any)
	name, _ := c["name"].(string)
	return name
}

// guardrailLine renders a guardrail event's categories: policy=value
// threshold.level=threshold.
func guardrailLine(ev *aep.Event) string {
	g, _ := ev.Data["guardrail"].(map[string]any)
	cats, _ := g["categories"].([]any)
	line := ""
	for _, c := range cats {
		m, _ := c.(map[string]any)
		line += fmt.Sprintf(" %v=%v", m["name"], m["score"])
	}
	return line
}
