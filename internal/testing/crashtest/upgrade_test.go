package crashtest

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/aeprelaytest"
	oh "github.com/otelcol-openhands/otelcol-openhands/internal/testing/openhandstest"
)

// updateUpgradeFixture writes the storage fixture of the release in
// VERSION from the built collector. Run it once per release, when the
// release is cut, and commit the result; an earlier release's fixture is
// never rewritten.
var updateUpgradeFixture = flag.Bool("update-upgrade-fixture", false, "write testdata/upgrade/<VERSION> from the built collector")

const (
	// upgradeAddr is the stub's fixed address: the receiver keys its
	// storage by the server's host:port, so a committed storage directory
	// is only found again at the same one.
	upgradeAddr = "127.0.0.34:18734"
	// upgradeConversation is the fixtures' one conversation.
	upgradeConversation = "5b0c6c1e-3a8f-4d2b-9f1e-2c7a0d4e6b11"
)

// upgradeExpect is what the release that wrote a fixture had emitted for
// the conversation when it stopped.
type upgradeExpect struct {
	Source  string `json:"source"`
	LastSeq int64  `json:"last_seq"`
}

// TestUpgradeResumesStoredSession starts the built collector on the
// storage each earlier release left (testdata/upgrade/<release>: one
// conversation observed through one run, then an orderly stop) while the
// agent server goes on with a second run: the collector resumes the stored
// session, with no second session.started, the same source, and seq going
// on from where that release stopped, gap free. That is the README's
// upgrade promise, for the receiver's storage.
func TestUpgradeResumesStoredSession(t *testing.T) {
	bin := collectorBinary(t)
	if *updateUpgradeFixture {
		raw, err := os.ReadFile(filepath.Join("..", "..", "..", "VERSION"))
		if err != nil {
			t.Fatal(err)
		}
		upgradeFrom(t, bin, filepath.Join("testdata", "upgrade", strings.TrimSpace(string(raw))))
		return
	}
	fixtures, err := filepath.Glob(filepath.Join("testdata", "upgrade", "*"))
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no storage fixture in testdata/upgrade (%v)", err)
	}
	for _, fixture := range fixtures {
		t.Run("from_"+filepath.Base(fixture), func(t *testing.T) { upgradeFrom(t, bin, fixture) })
	}
}

// upgradeFrom runs the upgrade from the fixture's release, or writes the
// fixture with -update-upgrade-fixture.
func upgradeFrom(t *testing.T, bin, fixture string) {
	dir := t.TempDir()
	storage := filepath.Join(dir, "storage")
	stub := oh.Start(t, oh.Config{SessionAPIKeys: []string{stubKey}, Addr: upgradeAddr})
	relay := aeprelaytest.Start(t, aeprelaytest.Config{Token: relayToken, DrainTimeout: time.Second})
	conv, err := stub.CreateConversation(oh.ConversationOptions{ID: upgradeConversation})
	if err != nil {
		t.Fatal(err)
	}
	// The history the old release saw: the same script gives the same
	// socket positions.
	if err := playRuns(conv, 0, 1); err != nil {
		t.Fatal(err)
	}
	config, logFile, _ := collectorFiles(t, dir, collectorConfig(storage, stub.URL(), "session", relay.URL(), noQueue, filepath.Join(dir, "sessions")))
	if *updateUpgradeFixture {
		writeUpgradeFixture(t, bin, logFile, config, relay, conv, storage, fixture)
		return
	}
	raw, err := os.ReadFile(filepath.Join(fixture, "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want upgradeExpect
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(storage, os.DirFS(filepath.Join(fixture, "storage"))); err != nil {
		t.Fatal(err)
	}

	history := len(conv.Events())
	col := startCollector(t, bin, logFile, config)
	defer col.stop()
	if err := playRuns(conv, 1, 2); err != nil {
		t.Fatal(err)
	}
	awaitNoneMissing(t, "vendor events of the run after the upgrade never reached the relay", func() int {
		byVendor, missing := vendorIDs(relay.Events()), 0
		for _, ve := range conv.Events()[history:] {
			if ve.Kind() != oh.KindTokenEvent && !byVendor[ve.ID()] {
				missing++
			}
		}
		return missing
	})
	col.stop()

	next := want.LastSeq + 1
	for _, r := range relay.Events() {
		ev := r.Event
		if ev.Type == "session.started" {
			t.Errorf("a second session.started (%s): the stored session was not resumed", ev.Source)
		}
		if ev.Source != want.Source {
			t.Errorf("event %s from %s, want the stored session's %s", ev.ID, ev.Source, want.Source)
			continue
		}
		if seq := seqOf(ev); seq != next {
			t.Errorf("event %s (%s): seq %d, want %d (%s stopped at %d)", ev.ID, ev.Type, seq, next, filepath.Base(fixture), want.LastSeq)
			continue
		}
		next++
	}
	if next == want.LastSeq+1 {
		t.Error("no event of the stored session reached the relay")
	}
}

// writeUpgradeFixture runs the built collector on empty storage until the
// relay has the whole history, stops it, and keeps its storage and what it
// emitted last as the fixture.
func writeUpgradeFixture(t *testing.T, bin string, logFile *os.File, config string, relay *aeprelaytest.Relay, conv *oh.Conversation, storage, fixture string) {
	t.Helper()
	if err := os.Mkdir(storage, 0o700); err != nil {
		t.Fatal(err)
	}
	col := startCollector(t, bin, logFile, config)
	awaitDelivered(t, relay, []*oh.Conversation{conv})
	col.stop()
	var last upgradeExpect
	for _, r := range relay.Events() {
		if seq := seqOf(r.Event); seq >= last.LastSeq {
			last = upgradeExpect{Source: r.Event.Source, LastSeq: seq}
		}
	}
	if err := os.RemoveAll(fixture); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(fixture, "storage"), os.DirFS(storage)); err != nil {
		t.Fatal(err)
	}
	raw, err := json.MarshalIndent(last, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fixture, "expect.json"), append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %+v", fixture, last)
}

// seqOf is an event's seq, -1 without one.
func seqOf(ev *aep.Event) int64 {
	if ev.Seq == nil {
		return -1
	}
	return *ev.Seq
}
