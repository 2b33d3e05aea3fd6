package readme

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/kafkaexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckv2extension"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/pprofextension"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/resourceprocessor"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/processor/memorylimiterprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/otelcol-openhands/otelcol-openhands/connector/aepconnector"
	"github.com/otelcol-openhands/otelcol-openhands/exporter/aepfileexporter"
	"github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"
	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol"
	"github.com/otelcol-openhands/otelcol-openhands/extension/openhandscontrol/controlcheck"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aepinboundprocessor"
	"github.com/otelcol-openhands/otelcol-openhands/processor/aeppolicyprocessor"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/aepreceiver"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"
)

// The distribution: the components, providers and converter
// builder-config.yaml names, as the generated main.go and components.go
// wire them. TestDistributionIsTheBuildersConfig holds these lists to it.
var (
	receivers  = []func() receiver.Factory{openhandsreceiver.NewFactory, aepreceiver.NewFactory, otlpreceiver.NewFactory}
	processors = []func() processor.Factory{batchprocessor.NewFactory, memorylimiterprocessor.NewFactory,
		resourceprocessor.NewFactory, aepinboundprocessor.NewFactory, aeppolicyprocessor.NewFactory}
	exporters = []func() exporter.Factory{aeprelayexporter.NewFactory, aepfileexporter.NewFactory, debugexporter.NewFactory,
		otlpexporter.NewFactory, otlphttpexporter.NewFactory, prometheusexporter.NewFactory, kafkaexporter.NewFactory}
	connectors = []func() connector.Factory{aepconnector.NewFactory}
	extensions = []func() extension.Factory{openhandscontrol.NewFactory, filestorage.NewFactory,
		healthcheckv2extension.NewFactory, bearertokenauthextension.NewFactory, pprofextension.NewFactory}
	converters = []func() confmap.ConverterFactory{controlcheck.NewFactory}
	providers  = []func() confmap.ProviderFactory{envprovider.NewFactory, fileprovider.NewFactory, yamlprovider.NewFactory}
)

func factories() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap(call(receivers)...); err != nil {
		return f, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap(call(processors)...); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap(call(exporters)...); err != nil {
		return f, err
	}
	if f.Connectors, err = otelcol.MakeFactoryMap(call(connectors)...); err != nil {
		return f, err
	}
	if f.Extensions, err = otelcol.MakeFactoryMap(call(extensions)...); err != nil {
		return f, err
	}
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, nil
}

func call[T any](fns []func() T) []T {
	out := make([]T, len(fns))
	for i, fn := range fns {
		out[i] = fn()
	}
	return out
}

func resolverSettings(uri string) confmap.ResolverSettings {
	return confmap.ResolverSettings{URIs: []string{uri}, ProviderFactories: call(providers), ConverterFactories: call(converters)}
}

// packageOf is the import path of the package a NewFactory belongs to.
func packageOf(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	return name[:strings.LastIndex(name, ".")]
}

func packagesOf[T any](fns []func() T) []string {
	out := make([]string, len(fns))
	for i, fn := range fns {
		out[i] = packageOf(fn)
	}
	slices.Sort(out)
	return out
}

// moduleRoot is the module's directory, three levels above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	return root
}

// readYAML reads a YAML document as a confmap (no ${…} is expanded).
func readYAML(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	retrieved, err := confmap.NewRetrievedFromYAML(raw)
	require.NoError(t, err)
	conf, err := retrieved.AsConf()
	require.NoError(t, err)
	return conf.ToStringMap()
}

// builderPackages reads an ocb builder configuration's component lists:
// for each section, the Go package of each entry (its import, else its
// gomod's module).
func builderPackages(t *testing.T, doc map[string]any) map[string][]string {
	t.Helper()
	out := make(map[string][]string)
	for _, section := range []string{"receivers", "processors", "exporters", "connectors", "extensions", "converters", "providers"} {
		entries, _ := doc[section].([]any)
		for i, e := range entries {
			entry, _ := e.(map[string]any)
			pkg, _ := entry["import"].(string)
			if pkg == "" {
				gomod, _ := entry["gomod"].(string)
				pkg, _, _ = strings.Cut(gomod, " ")
			}
			require.NotEmpty(t, pkg, "%s[%d] names no module", section, i)
			out[section] = append(out[section], pkg)
		}
		slices.Sort(out[section])
	}
	return out
}

// TestDistributionIsTheBuildersConfig: the factories these tests load
// configurations with are exactly the distribution's.
func TestDistributionIsTheBuildersConfig(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(moduleRoot(t), "builder-config.yaml"))
	require.NoError(t, err)
	built := builderPackages(t, readYAML(t, raw))
	assert.Equal(t, map[string][]string{
		"receivers": packagesOf(receivers), "processors": packagesOf(processors), "exporters": packagesOf(exporters),
		"connectors": packagesOf(connectors), "extensions": packagesOf(extensions),
		"converters": packagesOf(converters), "providers": packagesOf(providers),
	}, built)
}

// block is one fenced YAML block of a README.
type block struct {
	file string // relative to the module root
	line int    // of the opening fence
	kind string // the fence's word after yaml, "" for a whole configuration
	text string
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var (
	fenceOpen  = regexp.MustCompile("^(\\s*)```\\s*(yaml|yml)\\b\\s*(.*?)\\s*$")
	fenceClose = regexp.MustCompile("^\\s*```\\s*$")
)

// readmeBlocks finds every README.md under root (hidden, build and bin
// directories aside: generated or installed, not ours) and its YAML blocks.
func readmeBlocks(t *testing.T, root string) []block {
	t.Helper()
	var blocks []block
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "build" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "README.md" {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		found, err := yamlBlocks(path, rel)
		blocks = append(blocks, found...)
		return err
	})
	require.NoError(t, err)
	return blocks
}

func yamlBlocks(path, rel string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []block
	var open *block
	var indent string
	lines := bufio.NewScanner(f)
	for n := 1; lines.Scan(); n++ {
		line := lines.Text()
		switch {
		case open == nil:
			if m := fenceOpen.FindStringSubmatch(line); m != nil {
				open, indent = &block{file: rel, line: n, kind: m[3]}, m[1]
			}
		case fenceClose.MatchString(line):
			blocks = append(blocks, *open)
			open = nil
		default:
			open.text += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	if open != nil {
		return blocks, fmt.Errorf("%s: the block is never closed", open)
	}
	return blocks, lines.Err()
}

// exampleEnv gives each environment variable the examples name a value of
// the shape it has in use; an example naming another fails until it is
// added here.
var exampleEnv = map[string]string{
	"AEP_TOKEN":          "example-relay-token",
	"AEP_INGEST_TOKEN":   "example-ingest-token",
	"OH_SESSION_API_KEY": "example-session-key",
	"OTLP_INGEST_TOKEN":  "example-otlp-token",
	"POD_NAME":           "otelcol-openhands-0",
	"RUNTIME_API_KEY":    "example-runtime-api-key",
	"SHARD_INDEX":        "0",
}

var envRef = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)`)

// TestREADMEExamples loads every YAML block of every README.md, as its
// fence says it is meant (a block whose fence says nothing more than yaml
// is a whole configuration):
//
//   - ```yaml: a whole collector configuration, resolved, unmarshalled and
//     validated with the distribution's factories, providers and converter,
//     as `otelcol-openhands validate` does;
//   - ```yaml fragment: the sections of one that an example shows; each
//     component in it is unmarshalled into its factory's configuration and
//     validated, and every id its service section names is of a type the
//     distribution has;
//   - ```yaml builder: part of an ocb builder configuration, which may list
//     only components, providers and converters builder-config.yaml builds;
//   - ```yaml kubernetes: a Kubernetes manifest, which must name its
//     apiVersion and kind;
//   - ```yaml prometheus: a Prometheus configuration, read by Prometheus'
//     own loader;
//   - ```yaml grafana: a Grafana provisioning file, which must name its
//     apiVersion.
//
// Any other fence fails: no block is skipped.
func TestREADMEExamples(t *testing.T) {
	root := moduleRoot(t)
	blocks := readmeBlocks(t, root)
	require.NotEmpty(t, blocks)
	raw, err := os.ReadFile(filepath.Join(root, "builder-config.yaml"))
	require.NoError(t, err)
	built := builderPackages(t, readYAML(t, raw))
	for _, b := range blocks {
		t.Run(b.String(), func(t *testing.T) {
			for _, m := range envRef.FindAllStringSubmatch(b.text, -1) {
				value, ok := exampleEnv[m[1]]
				require.True(t, ok, "the example names ${env:%s}: give it a value in exampleEnv", m[1])
				t.Setenv(m[1], value)
			}
			switch b.kind {
			case "":
				requireValidConfig(t, b)
			case "fragment":
				requireValidFragment(t, b)
			case "builder":
				requireBuilt(t, b, built)
			case "kubernetes":
				doc := readYAML(t, []byte(b.text))
				assert.NotEmpty(t, doc["apiVersion"], "apiVersion")
				assert.NotEmpty(t, doc["kind"], "kind")
			case "prometheus":
				_, err := promconfig.Load(b.text, slog.New(slog.DiscardHandler))
				require.NoError(t, err, "Prometheus' own configuration loader")
			case "grafana":
				doc := readYAML(t, []byte(b.text))
				assert.NotEmpty(t, doc["apiVersion"], "a Grafana provisioning file names its apiVersion")
			default:
				t.Fatalf("the fence says yaml %q: want nothing more (a whole configuration), fragment, builder, kubernetes, prometheus or grafana", b.kind)
			}
		})
	}
}

func writeBlock(t *testing.T, b block) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.text), 0o600))
	return "file:" + path
}

// validate is `otelcol-openhands validate`: the collector's own load,
// unmarshal and validation of the whole configuration (DryRun).
func validate(t *testing.T, b block) error {
	t.Helper()
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo:              component.BuildInfo{Command: "otelcol-openhands", Version: "readme"},
		Factories:              factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: resolverSettings(writeBlock(t, b))},
		SkipSettingGRPCLogger:  true,
	})
	require.NoError(t, err)
	return col.DryRun(context.Background())
}

func requireValidConfig(t *testing.T, b block) {
	t.Helper()
	require.NoError(t, validate(t, b))
}

// TestSecurityExampleRefusesUnsetToken: the top README's production
// configuration, which TestREADMEExamples loads with its credentials set,
// is refused with the OTLP ingest token unset, as the README says.
func TestSecurityExampleRefusesUnsetToken(t *testing.T) {
	blocks, err := yamlBlocks(filepath.Join(moduleRoot(t), "README.md"), "README.md")
	require.NoError(t, err)
	i := slices.IndexFunc(blocks, func(b block) bool {
		return b.kind == "" && strings.Contains(b.text, "${env:OTLP_INGEST_TOKEN}")
	})
	require.GreaterOrEqual(t, i, 0, "README.md has no whole configuration naming OTLP_INGEST_TOKEN")
	for _, m := range envRef.FindAllStringSubmatch(blocks[i].text, -1) {
		t.Setenv(m[1], exampleEnv[m[1]])
	}
	t.Setenv("OTLP_INGEST_TOKEN", "")
	require.ErrorContains(t, validate(t, blocks[i]), "bearertokenauth/otlp")
}

// requireValidFragment validates each component a fragment configures,
// as the collector would within a whole configuration.
func requireValidFragment(t *testing.T, b block) {
	resolver, err := confmap.NewResolver(resolverSettings(writeBlock(t, b)))
	require.NoError(t, err)
	conf, err := resolver.Resolve(context.Background())
	require.NoError(t, err)
	f, err := factories()
	require.NoError(t, err)
	sections := map[string]func(component.Type) (component.Factory, bool){
		"receivers":  lookup(f.Receivers),
		"processors": lookup(f.Processors),
		"exporters":  lookup(f.Exporters),
		"connectors": lookup(f.Connectors),
		"extensions": lookup(f.Extensions),
	}
	for _, section := range slices.Sorted(maps.Keys(conf.ToStringMap())) {
		if section == "service" {
			requireKnownIDs(t, conf, sections)
			continue
		}
		find, ok := sections[section]
		require.True(t, ok, "%s is no section of a collector configuration", section)
		sub, err := conf.Sub(section)
		require.NoError(t, err)
		for _, name := range slices.Sorted(maps.Keys(sub.ToStringMap())) {
			var id component.ID
			require.NoError(t, id.UnmarshalText([]byte(name)), "%s::%s", section, name)
			factory, ok := find(id.Type())
			require.True(t, ok, "%s::%s: the distribution has no %s of type %s", section, name, section, id.Type())
			cfg := factory.CreateDefaultConfig()
			c, err := sub.Sub(name)
			require.NoError(t, err)
			require.NoError(t, c.Unmarshal(cfg), "%s::%s", section, name)
			require.NoError(t, confmap.Validate(cfg), "%s::%s", section, name)
		}
	}
}

func lookup[F component.Factory](m map[component.Type]F) func(component.Type) (component.Factory, bool) {
	return func(typ component.Type) (component.Factory, bool) {
		f, ok := m[typ]
		return f, ok
	}
}

// requireKnownIDs: every id a fragment's service section names is of a
// type the distribution has (a connector stands where a receiver or an
// exporter may).
func requireKnownIDs(t *testing.T, conf *confmap.Conf, sections map[string]func(component.Type) (component.Factory, bool)) {
	t.Helper()
	known := func(key string, kinds ...string) {
		names, _ := conf.Get(key).([]any)
		for _, n := range names {
			var id component.ID
			require.NoError(t, id.UnmarshalText(fmt.Append(nil, n)), key)
			found := false
			for _, kind := range kinds {
				_, ok := sections[kind](id.Type())
				found = found || ok
			}
			assert.True(t, found, "%s names %s: the distribution has no %s of type %s", key, id, strings.Join(kinds, " or "), id.Type())
		}
	}
	known("service::extensions", "extensions")
	pipelines, _ := conf.Get("service::pipelines").(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(pipelines)) {
		prefix := "service::pipelines::" + name + "::"
		known(prefix+"receivers", "receivers", "connectors")
		known(prefix+"processors", "processors")
		known(prefix+"exporters", "exporters", "connectors")
	}
}

// requireBuilt: a builder snippet lists only what builder-config.yaml
// builds, in the same section.
func requireBuilt(t *testing.T, b block, built map[string][]string) {
	doc := readYAML(t, []byte(b.text))
	for section, pkgs := range builderPackages(t, doc) {
		for _, pkg := range pkgs {
			assert.Contains(t, built[section], pkg, "%s: builder-config.yaml builds no %s", section, pkg)
		}
	}
	for key := range doc {
		switch key {
		case "dist", "receivers", "processors", "exporters", "connectors", "extensions", "converters", "providers", "replaces":
		default:
			t.Errorf("%s is no key of a builder configuration", key)
		}
	}
}
