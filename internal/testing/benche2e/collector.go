package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ourConfig is the collector under test: the openhands receiver, batch and
// the aeprelay exporter, with the pprof extension that the harness reads
// heap figures (and, on request, CPU profiles) from. storageDir, when set,
// puts the exporter queue on file_storage, as a production deployment
// would; rs, when set, the receiver's conversation state too.
func ourConfig(stubURL, key, relayURL, token, pprofAddr, metricsAddr string, batchTimeout time.Duration, storageDir string, rs *receiverStorage) string {
	host, port, _ := strings.Cut(metricsAddr, ":")
	storageExt, queue, extensions := "", "", "pprof"
	if storageDir != "" {
		storageExt = fmt.Sprintf("  file_storage:\n    directory: %s\n", storageDir)
		queue = "    sending_queue:\n      storage: file_storage\n"
		extensions += ", file_storage"
	}
	receiver := "        max_conversations: 100000 # -idle attaches past the default 1,000\n"
	if rs != nil {
		storageExt += rs.compaction(storageDir)
		receiver = fmt.Sprintf("        max_conversations: %d\n    storage: file_storage\n    idle_detach: %s\n", rs.maxConversations, rs.idleDetach)
	}
	return fmt.Sprintf(`extensions:
  pprof:
    endpoint: %s
%sreceivers:
  openhands:
    servers:
      - endpoint: %s
        session_api_key: %s
        name: stub
%s    poll_interval: %s
processors:
  batch:
    timeout: %s
exporters:
  aeprelay:
    endpoint: %s
    token: %s
%sservice:
  extensions: [%s]
  telemetry:
    logs:
      level: warn
    metrics:
      level: normal
      readers:
        - pull:
            exporter:
              prometheus:
                host: %s
                port: %s
  pipelines:
    logs:
      receivers: [openhands]
      processors: [batch]
      exporters: [aeprelay]
`, pprofAddr, storageExt, stubURL, key, receiver, rs.pollInterval(), batchTimeout, relayURL, token, queue, extensions, host, port)
}

// receiverStorage is the receiver's side of the churn benchmark: its state
// on file_storage, compacted as the receiver README recommends.
type receiverStorage struct {
	maxConversations int
	idleDetach       time.Duration
	poll             time.Duration
}

// compaction is the file_storage compaction that gives back the space of
// ended conversations: online once the file has grown past 1 MiB and its
// live data dropped below 1 MiB, and at every start.
func (rs *receiverStorage) compaction(dir string) string {
	return fmt.Sprintf(`    compaction:
      directory: %s
      on_start: true
      on_rebound: true
      rebound_needed_threshold_mib: 1
      rebound_trigger_threshold_mib: 1
      check_interval: 1s
`, dir)
}

func (rs *receiverStorage) pollInterval() time.Duration {
	if rs == nil {
		return time.Second
	}
	return rs.poll
}

// plainConfig is the baseline: otlp → batch → otlp_http with defaults.
func plainConfig(receiverAddr, sinkURL string, batchTimeout time.Duration) string {
	return otlpPipeline(receiverAddr, batchTimeout, "otlp_http", "endpoint: "+sinkURL)
}

// otlpPipeline is otlp → batch → exporter, the exporter configured by
// settings (one YAML line a setting).
func otlpPipeline(receiverAddr string, batchTimeout time.Duration, exporter string, settings ...string) string {
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
processors:
  batch:
    timeout: %s
exporters:
  %s:
    %s
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      processors: [batch]
      exporters: [%s]
`, receiverAddr, batchTimeout, exporter, strings.Join(settings, "\n    "), exporter)
}

func startCollector(name, dir, bin, config string) (*proc, error) {
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, err
	}
	return startProc(name, dir, []string{bin, "--config=" + path})
}

// awaitListening waits until addr accepts connections or p exits.
func awaitListening(ctx context.Context, p *proc, addr string) error {
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("%s exited while starting (see %s)", p.name, p.stderr.Name())
		case <-ctx.Done():
			return fmt.Errorf("%s not listening on %s: %w", p.name, addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// heapStats reads the collector's Go heap through the pprof extension,
// after a forced collection: what is live, not what awaits the collector.
func heapStats(ctx context.Context, pprofAddr string) (alloc, inuse uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+"/debug/pprof/heap?debug=1&gc=1", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("read the collector's heap: %w", err)
	}
	defer resp.Body.Close()
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(nil, 16<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			alloc, _ = strconv.ParseUint(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			inuse, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	if alloc == 0 {
		return 0, 0, fmt.Errorf("no HeapAlloc in the heap profile (%v)", scanner.Err())
	}
	return alloc, inuse, nil
}

// confirmWait reads the exporter's confirm latency histogram: the count of
// confirmed batches and the sum of their waits in seconds.
func confirmWait(ctx context.Context, metricsAddr string) (count, sum float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("read the collector's metrics: %w", err)
	}
	defer resp.Body.Close()
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(nil, 16<<20)
	for scanner.Scan() {
		name, value, ok := strings.Cut(scanner.Text(), " ")
		if !ok || !strings.HasPrefix(name, "otelcol_aeprelay_confirm_latency") {
			continue
		}
		v, _ := strconv.ParseFloat(value, 64)
		base, _, _ := strings.Cut(name, "{")
		switch {
		case strings.HasSuffix(base, "_count"):
			count += v
		case strings.HasSuffix(base, "_sum"):
			sum += v
		}
	}
	return count, sum, scanner.Err()
}

// saveProfile writes a profile of the collector over d to path: kind is
// "profile" (CPU) or "allocs" (what was allocated meanwhile).
func saveProfile(ctx context.Context, pprofAddr, kind string, d time.Duration, path string) error {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", pprofAddr, kind, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = bufio.NewReader(resp.Body).WriteTo(f)
	return err
}
