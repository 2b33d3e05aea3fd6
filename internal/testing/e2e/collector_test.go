package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"
	"github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"
	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"
)

const (
	stubKey    = "e2e-session-key"
	relayToken = "e2e-relay-token"
	// waitFor bounds every wait of these tests.
	waitFor = 15 * time.Second
	tick    = 5 * time.Millisecond
)

// pipelineConfig is what the collector under test connects to.
type pipelineConfig struct {
	agentServer string // base URL of the stub agent server
	relay       string // base URL of the AEP relay
	// socket is the receiver's servers[].socket: session, events, or ""
	// for its default (auto: session where the server has it).
	socket string
	// otlp is the OTLP/HTTP sink's base URL; "" leaves the otlphttp
	// exporter out of the pipeline.
	otlp string
	// confirmTimeout bounds the wait for the pong that confirms a batch.
	confirmTimeout time.Duration
	// quiet logs only the collector's errors: a benchmark's own relay
	// restarts would fill its output with warnings.
	quiet bool
	// storage is a directory for the receiver's state (counting_storage,
	// file_storage that counts what it writes); "" runs without storage.
	storage string
	// traces is the OTLP/HTTP traces sink's base URL and prometheus the
	// prometheus exporter's host:port; either adds the aep connector,
	// feeding a traces pipeline to the sink and a metrics pipeline to the
	// exporter.
	traces, prometheus string
	// control, when set, is the openhandscontrol extension's
	// configuration (indented YAML lines); the receiver and the exporter
	// both name the extension.
	control string
	// noToken leaves the exporter's relay token out (a watch-only relay).
	noToken bool
	// receiverExtra is appended to the receiver's configuration (indented
	// YAML lines).
	receiverExtra string
	// policy, when set, is the aeppolicy processor's configuration
	// (indented YAML lines); the processor runs before batch.
	policy string
	// metrics, when set, is a host:port where the collector serves its
	// internal metrics for Prometheus.
	metrics string
}

// yaml renders the collector configuration: short timings everywhere so
// that faults heal within a test, retries that never give up (a test that
// loses events must fail on the loss, not on a dropped batch), and no
// internal metrics, so nothing binds a port but the components under test.
func (c pipelineConfig) yaml() string {
	confirm := c.confirmTimeout
	if confirm == 0 {
		confirm = 5 * time.Second
	}
	const retry = `
    retry_on_failure:
      initial_interval: 10ms
      max_interval: 100ms
      max_elapsed_time: 0s`
	socket := ""
	if c.socket != "" {
		socket = "\n        socket: " + c.socket
	}
	exporters := []string{"aeprelay"}
	receiverExtra, exporterExtra, token := c.receiverExtra, "", "\n    token: "+relayToken
	if c.noToken {
		token = ""
	}
	var extensions []string
	var extensionConfigs strings.Builder
	if c.storage != "" {
		receiverExtra += "\n    storage: counting_storage"
		extensions = append(extensions, "counting_storage")
		fmt.Fprintf(&extensionConfigs, "  counting_storage:\n    directory: %s\n", c.storage)
	}
	if c.control != "" {
		receiverExtra += "\n    control: openhandscontrol"
		exporterExtra = "\n    control: openhandscontrol"
		extensions = append(extensions, "openhandscontrol")
		fmt.Fprintf(&extensionConfigs, "  openhandscontrol:\n%s\n", c.control)
	}
	processors, policy := "batch", ""
	if c.policy != "" {
		processors, policy = "aeppolicy, batch", "\n  aeppolicy:\n"+c.policy
	}
	telemetry := "\n      level: none"
	if c.metrics != "" {
		host, port, _ := strings.Cut(c.metrics, ":")
		telemetry = fmt.Sprintf(`
      level: normal
      readers:
        - pull:
            exporter:
              prometheus:
                host: %s
                port: %s`, host, port)
	}
	var b strings.Builder
	if extensionConfigs.Len() > 0 {
		fmt.Fprintf(&b, "\nextensions:\n%s", extensionConfigs.String())
	}
	fmt.Fprintf(&b, `
receivers:
  openhands:
    servers:
      - endpoint: %s
        session_api_key: %s
        name: stub%s
    poll_interval: 50ms%s
    reconnect:
      initial_interval: 10ms
      max_interval: 100ms
processors:%s
  batch:
    timeout: 20ms
exporters:
  aeprelay:
    endpoint: %s%s%s
    instance: e2e/1
    hello_timeout: 2s
    confirm_timeout: %s
    timeout: 5s
    reconnect:
      initial_interval: 10ms
      max_interval: 100ms%s
`, c.agentServer, stubKey, socket, receiverExtra, policy, c.relay, token, exporterExtra, confirm, retry)
	if c.otlp != "" {
		exporters = append(exporters, "otlp_http")
		fmt.Fprintf(&b, `
  otlp_http:
    endpoint: %s%s
`, c.otlp, retry)
	}
	connected := c.traces != "" || c.prometheus != ""
	if connected {
		exporters = append(exporters, "aep")
		fmt.Fprintf(&b, `
  otlp_http/traces:
    traces_endpoint: %s/v1/traces%s
  prometheus:
    endpoint: %s
connectors:
  aep:
`, c.traces, retry, c.prometheus)
	}
	fmt.Fprintf(&b, `
service:
  extensions: [%s]
  telemetry:
    metrics:%s
  pipelines:
    logs:
      receivers: [openhands]
      processors: [%s]
      exporters: [%s]
`, strings.Join(extensions, ", "), telemetry, processors, strings.Join(exporters, ", "))
	if connected {
		b.WriteString(`
    traces:
      receivers: [aep]
      exporters: [otlp_http/traces]
    metrics:
      receivers: [aep]
      exporters: [prometheus]
`)
	}
	return b.String()
}

// factories are the distribution's components this pipeline uses, wired
// as the generated components.go wires them.
func factories() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap(openhandsreceiver.NewFactory(), aepreceiver.NewFactory(), otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, fmt.Errorf("receiver factories: %w", err)
	}
	processors, err := otelcol.MakeFactoryMap(batchprocessor.NewFactory(), aepinboundprocessor.NewFactory(), aeppolicyprocessor.NewFactory())
	if err != nil {
		return otelcol.Factories{}, fmt.Errorf("processor factories: %w", err)
	}
	exporters, err := otelcol.MakeFactoryMap(aeprelayexporter.NewFactory(), otlphttpexporter.NewFactory(),
		prometheusexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, fmt.Errorf("exporter factories: %w", err)
	}
	extensions, err := otelcol.MakeFactoryMap(countingStorageFactory(), openhandscontrol.NewFactory(), bearertokenauthextension.NewFactory())
	if err != nil {
		return otelcol.Factories{}, fmt.Errorf("extension factories: %w", err)
	}
	connectors, err := otelcol.MakeFactoryMap(aepconnector.NewFactory())
	if err != nil {
		return otelcol.Factories{}, fmt.Errorf("connector factories: %w", err)
	}
	return otelcol.Factories{
		Extensions: extensions,
		Receivers:  receivers,
		Processors: processors,
		Exporters:  exporters,
		Connectors: connectors,
		Telemetry:  otelconftelemetry.NewFactory(),
	}, nil
}

// collector is the collector service running in this process.
type collector struct {
	tb       testing.TB
	col      *otelcol.Collector
	done     chan error // Run's result
	stopOnce sync.Once
}

// startCollector runs the collector with cfg until tb ends (or stop), and
// returns once every component has started.
func startCollector(tb testing.TB, cfg pipelineConfig) *collector {
	tb.Helper()
	level := zap.WarnLevel
	if cfg.quiet {
		level = zap.ErrorLevel
	}
	return startCollectorYAML(tb, cfg.yaml(), level)
}

// startCollectorYAML runs the collector with the configuration config,
// logging from level up, as startCollector does.
func startCollectorYAML(tb testing.TB, config string, level zapcore.Level) *collector {
	tb.Helper()
	logger := zaptest.NewLogger(tb, zaptest.Level(level))
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol-openhands",
			Description: "otelcol-openhands, end-to-end tests",
			Version:     "e2e",
		},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				URIs:              []string{"yaml:" + config},
				ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
			},
		},
		// The test binary keeps its own signal handling, and the process-wide
		// gRPC logger is not ours to replace.
		DisableGracefulShutdown: true,
		SkipSettingGRPCLogger:   true,
		// The collector's log goes to the test's log, warnings and up.
		LoggingOptions: []zap.Option{zap.WrapCore(func(zapcore.Core) zapcore.Core { return logger.Core() })},
	})
	if err != nil {
		tb.Fatalf("create collector: %v", err)
	}
	c := &collector{tb: tb, col: col, done: make(chan error, 1)}
	go func() { c.done <- col.Run(context.Background()) }()
	deadline := time.After(waitFor)
	for col.GetState() != otelcol.StateRunning {
		select {
		case err := <-c.done:
			tb.Fatalf("collector exited while starting: %v", err)
		case <-deadline:
			c.stop()
			tb.Fatalf("collector not running after %s (state %s)", waitFor, col.GetState())
		case <-time.After(tick):
		}
	}
	tb.Cleanup(c.stop)
	return c
}

// stop shuts the collector down and waits, bounded, for Run to return.
// It is idempotent.
func (c *collector) stop() {
	c.stopOnce.Do(func() {
		go c.col.Shutdown()
		select {
		case err := <-c.done:
			if err != nil {
				c.tb.Errorf("collector run: %v", err)
			}
		case <-time.After(waitFor):
			c.tb.Errorf("collector did not shut down within %s", waitFor)
		}
	})
}
