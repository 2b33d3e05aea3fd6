package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/projection"
	"github.com/otelcol-openhands/otelcol-openhands/internal/testing/childproc"
)

// diskSessions is how many sessions the disk load spreads its events over.
const diskSessions = 10

// diskRow is one fsync policy's measurement of the aepfile exporter.
type diskRow struct {
	fsync string
	rates []diskRate
	// burst, perSecond and burstCPU: the ceiling, a burst posted as fast as
	// the collector takes it, timed to its last line on disk.
	burst     int
	perSecond float64
	burstCPU  float64
}

type diskRate struct {
	rate          float64
	sent, written int
	cpu           float64
}

// diskConfig is otlp → batch → aepfile: the plain pipeline with session
// logs in place of otlp_http, so the two CPU figures differ by the
// exporter.
func diskConfig(receiverAddr, dir, fsync string, batchTimeout time.Duration) string {
	return otlpPipeline(receiverAddr, batchTimeout, "aepfile", "directory: "+dir, "fsync: "+fsync)
}

// aepRecords are n AEP tool.completed events, numbered from first, over
// diskSessions sessions, projected onto log records as our receiver
// projects them.
func aepRecords(n, first int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	projection.SetResource(rl.Resource(), "openhands")
	records := rl.ScopeLogs().AppendEmpty().LogRecords()
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	for i := first; i < first+n; i++ {
		session := fmt.Sprintf("5f1c2e0a-7c4b-4d4e-9a55-%012d", i%diskSessions)
		ev := &aep.Event{
			AEP: aep.Version, ID: fmt.Sprintf("01K%023d", i), Type: "tool.completed", Subject: "terminal", Time: now,
			Source: "aep://otelcol/agent/openhands/session/" + session, Agent: "openhands", Session: session,
			Run: "run-1", Seq: aep.Int64(int64(i / diskSessions)), Epoch: aep.Int64(0), Capture: aep.CaptureMetadata,
			Data: map[string]any{
				"tool":            map[string]any{"name": "terminal", "call_id": "toolu_01"},
				"status":          "ok",
				"vendor_event_id": "8c2e5a3b-1d4f-4e6a-9b7c-2f1e0d3c4b5a",
			},
		}
		if err := projection.ToLogRecord(ev, records.AppendEmpty(), projection.Options{}); err != nil {
			panic(err) // the event is fixed above: a failure is a bug here
		}
	}
	return ld
}

// lineCounter counts the lines written under a session log directory,
// reading only what was appended since it last looked.
type lineCounter struct {
	dir     string
	offsets map[string]int64
	lines   int
}

func (c *lineCounter) count() (int, error) {
	paths, err := filepath.Glob(filepath.Join(c.dir, "*", "*.jsonl"))
	if err != nil {
		return 0, err
	}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return 0, err
		}
		raw, err := io.ReadAll(io.NewSectionReader(f, c.offsets[path], 1<<62))
		f.Close()
		if err != nil {
			return 0, err
		}
		c.offsets[path] += int64(len(raw))
		c.lines += bytes.Count(raw, []byte{'\n'})
	}
	return c.lines, nil
}

// runDisk measures the aepfile exporter under each fsync policy: CPU per
// 1,000 events written at each offered rate, then the ceiling.
func runDisk(ctx context.Context, o options, dir string) ([]diskRow, error) {
	var rows []diskRow
	for _, fsync := range []string{"none", "every_batch"} {
		row, err := measureDisk(ctx, o, filepath.Join(dir, "sessions-"+fsync), fsync)
		if err != nil {
			return nil, fmt.Errorf("fsync %s: %w", fsync, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func measureDisk(ctx context.Context, o options, dir, fsync string) (diskRow, error) {
	row := diskRow{fsync: fsync}
	addr, err := childproc.FreeAddr()
	if err != nil {
		return row, err
	}
	col, err := startCollector("disk-"+fsync, filepath.Dir(dir), o.collector, diskConfig(addr, dir, fsync, o.batchTimeout))
	if err != nil {
		return row, err
	}
	defer col.stop(10 * time.Second)
	if err := awaitListening(ctx, col, addr); err != nil {
		return row, err
	}
	url := "http://" + addr + "/v1/logs"
	lines := &lineCounter{dir: dir, offsets: map[string]int64{}}
	first := 0
	// records numbers events across the whole run: ids never repeat, and
	// each session's positions keep increasing.
	records := func(n, from int) plog.Logs { return aepRecords(n, first+from) }
	for _, rate := range o.rates {
		say("disk, fsync %s: offering %g events/s for %s", fsync, rate, o.duration)
		cpu := newCPUMeter(map[string]*proc{"disk": col})
		sent, err := loadOTLP(ctx, url, rate, o.duration, records)
		if err != nil {
			return row, err
		}
		first += sent
		if err := awaitCount(ctx, lines.count, first, drainFor); err != nil {
			say("warning: %v", err)
		}
		written, _ := lines.count()
		row.rates = append(row.rates, diskRate{rate: rate, sent: sent, written: written - (first - sent), cpu: cpu.spent()["disk"]})
	}
	if o.burst > 0 {
		row.burst = o.burst * o.conversations
		say("disk, fsync %s: a burst of %d events", fsync, row.burst)
		cpu := newCPUMeter(map[string]*proc{"disk": col})
		client := &http.Client{Timeout: 30 * time.Second}
		start := time.Now()
		const perRequest = 1000
		for sent := 0; sent < row.burst; sent += perRequest {
			if err := postLogs(ctx, client, url, aepRecords(min(perRequest, row.burst-sent), first+sent)); err != nil {
				return row, err
			}
		}
		first += row.burst
		if err := awaitCount(ctx, lines.count, first, 3*time.Minute); err != nil {
			say("warning: %v", err)
		}
		row.perSecond = float64(row.burst) / time.Since(start).Seconds()
		row.burstCPU = cpu.spent()["disk"]
	}
	return row, nil
}

func printDisk(rows []diskRow) {
	fmt.Printf("\nTo disk: the same binary running otlp → batch → aepfile (session logs, %d sessions), fed AEP records over OTLP/HTTP; compare its CPU with the plain OTLP pipeline's above.\n\n", diskSessions)
	fmt.Println("| fsync | rate | written of sent | CPU-s per 1,000 |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		for _, rate := range r.rates {
			fmt.Printf("| %s | %g/s | %d of %d | %s |\n", r.fsync, rate.rate, rate.written, rate.sent, perThousand(rate.cpu, rate.written))
		}
	}
	for _, r := range rows {
		if r.burst > 0 {
			fmt.Printf("\nCeiling, fsync %s: a burst of %d events on disk at %.0f events/s, %s CPU-s per 1,000.\n",
				r.fsync, r.burst, r.perSecond, perThousand(r.burstCPU, r.burst))
		}
	}
}
