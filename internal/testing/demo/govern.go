package main

import (
	"context"
	"fmt"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// runGovern is `make demo-govern`: the aeppolicy processor watches a run
// whose wall time crosses its session budget: a notice, then the hard
// breach, which pauses the conversation through the open gate as a
// command the collector originates (acked with the breach as cause); the
// operator resumes it through the relay, and the agent finishes.
func runGovern(ctx context.Context, collectorBin, config string) error {
	return runGated(ctx, collectorBin, config, "Run the slow test suite",
		"a session's runs may run 1.5s (notice) and 3s (pause)", (*controlDemo).govern)
}

func (d *controlDemo) govern() error {
	if _, err := d.await("the collector to attach", "state.snapshot", ""); err != nil {
		return err
	}
	say("scenario: the agent starts a run and keeps working past its budget")
	if _, err := d.conv.SendUserMessage("Run the whole test suite.", false); err != nil {
		return err
	}
	if err := d.status(oh.StatusRunning); err != nil {
		return err
	}
	if _, err := d.conv.Append(oh.TerminalAction("go test ./...")); err != nil {
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
	if err := d.conv.FinishRun(oh.StatusFinished); err != nil {
		return err
	}
	_, err = d.await("run.finished", "run.finished", "")
	return err
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
