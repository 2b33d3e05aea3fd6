package distribution

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var chartDir = filepath.Join(repoRoot, "charts", Name)

const (
	fixtureDashboard = `{"title": "otelcol-openhands fixture", "panels": [], "schemaVersion": 39}`
	fixtureRules     = `groups:
  - name: otelcol-openhands-fixture
    rules:
      - alert: FixtureAlert
        expr: up{job="otelcol-openhands"} == 0
        for: 5m
        labels: {severity: warning}
        annotations: {summary: a fixture rule}
`
)

// rendered is a rendered chart, each manifest decoded strictly into its
// type (an unknown or misplaced field fails the decode).
type rendered struct {
	statefulSets    []appsv1.StatefulSet
	configMaps      []corev1.ConfigMap
	services        []corev1.Service
	prometheusRules []monitoringv1.PrometheusRule
	serviceMonitors []monitoringv1.ServiceMonitor
}

// operatorAPIs are the Prometheus Operator's kinds the chart asks the
// cluster for.
var operatorAPIs = []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/PrometheusRule", "monitoring.coreos.com/v1/ServiceMonitor"}

// TestChart renders the chart as a user installs it, with a fixture
// dashboard and rule file in the cockpit, and checks the StatefulSet shape:
// shard index from the pod ordinal, count from replicas, state on a
// volume, keys from the Secret, probes on healthcheckv2, resources; the
// configuration (the built collector validates it); the dashboard as a
// ConfigMap and the rules as a PrometheusRule.
func TestChart(t *testing.T) {
	chart := chartWithCockpit(t, map[string]string{
		"dashboards/agents.json": fixtureDashboard,
		"rules/alerts.yaml":      fixtureRules,
	})
	r := renderChart(t, chart, map[string]any{"replicas": 3}, operatorAPIs...)
	version, err := ReadVersion(repoRoot)
	if err != nil {
		t.Fatal(err)
	}

	if len(r.statefulSets) != 1 {
		t.Fatalf("%d StatefulSets, want 1", len(r.statefulSets))
	}
	sts := r.statefulSets[0]
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", sts.Spec.Replicas)
	}
	pod := sts.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if want := "otelcol-openhands:" + version; c.Image != want {
		t.Errorf("image %q, want %q", c.Image, want)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if ref := env["SHARD_INDEX"].ValueFrom; ref == nil || ref.FieldRef == nil || ref.FieldRef.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("SHARD_INDEX: %+v, want the pod-index label through the downward API", env["SHARD_INDEX"])
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "otelcol-openhands-keys" {
		t.Errorf("envFrom %+v, want the keys Secret", c.EnvFrom)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: requests and a memory limit are required", c.Resources)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, probe := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/status" || probe.HTTPGet.Port.StrVal != "health" {
			t.Errorf("%s probe %+v, want GET /status on the health port", name, probe)
		}
	}
	if p := c.StartupProbe; p != nil && p.PeriodSeconds*p.FailureThreshold < 300 {
		t.Errorf("startup probe gives %ds, want at least 5 minutes for a start that compacts file_storage", p.PeriodSeconds*p.FailureThreshold)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsUser == nil || *pod.SecurityContext.RunAsUser != ImageUID ||
		pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("pod securityContext %+v, want runAsNonRoot as the image's user %d", pod.SecurityContext, ImageUID)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "state" {
		t.Fatalf("volumeClaimTemplates %+v, want one named state", sts.Spec.VolumeClaimTemplates)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}

	config := configMapData(t, r, "config.yaml")
	cfg := parseCollectorConfig(t, []byte(config))
	checkSafeDefault(t, cfg)
	if got := cfg.Receivers.OpenHands.Shard; got["index"] != "${env:SHARD_INDEX}" || got["count"] != float64(3) {
		t.Errorf("shard %v, want index ${env:SHARD_INDEX} and count 3 (= replicas)", got)
	}
	if got := cfg.Extensions["file_storage"].Directory; got != mounts["state"] {
		t.Errorf("file_storage.directory %q is not where the state volume is mounted (%q)", got, mounts["state"])
	}
	if got := cfg.Extensions["healthcheckv2"].HTTP.Endpoint; !strings.HasSuffix(got, ":13133") || ports["health"] != 13133 {
		t.Errorf("healthcheckv2 listens on %q, the probes ask port %d", got, ports["health"])
	}
	validateConfig(t, config, "SHARD_INDEX=2", "MY_POD_IP=127.0.0.1", "OH_SESSION_API_KEY=k")

	if got := configMapData(t, r, "agents.json"); got != fixtureDashboard+"\n" && got != fixtureDashboard {
		t.Errorf("dashboard ConfigMap holds %q, want the cockpit's file", got)
	}
	for _, cm := range r.configMaps {
		if _, ok := cm.Data["agents.json"]; ok && cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("dashboard ConfigMap %s: labels %v, want grafana_dashboard=1 for the sidecar", cm.Name, cm.Labels)
		}
	}
	if len(r.serviceMonitors) != 1 || len(r.services) != 1 {
		t.Fatalf("%d ServiceMonitors, %d Services; want 1 and 1", len(r.serviceMonitors), len(r.services))
	}
	sm, svc := r.serviceMonitors[0], r.services[0]
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, the Service has %q", k, v, svc.Labels[k])
		}
	}
	if len(sm.Spec.Endpoints) != 1 || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Name == sm.Spec.Endpoints[0].Port && p.Port == ports["metrics"]
	}) {
		t.Errorf("ServiceMonitor endpoints %+v: not the Service's metrics port %d", sm.Spec.Endpoints, ports["metrics"])
	}
	if len(r.prometheusRules) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(r.prometheusRules))
	}
	groups := r.prometheusRules[0].Spec.Groups
	if len(groups) != 1 || groups[0].Name != "otelcol-openhands-fixture" || len(groups[0].Rules) != 1 ||
		groups[0].Rules[0].Alert != "FixtureAlert" || groups[0].Rules[0].Expr.String() != `up{job="otelcol-openhands"} == 0` {
		t.Errorf("PrometheusRule groups %+v, want the fixture's", groups)
	}
}

// TestChartTargetAllocatorShape: replicas fed by the Target Allocator's
// http_sd are not sharded again (that would leave most of what each is
// given observed by none), and each knows its pod name, the allocator's
// collector_id.
func TestChartTargetAllocatorShape(t *testing.T) {
	r := renderChart(t, chartWithCockpit(t, nil), map[string]any{"replicas": 3, "shardByOrdinal": false})
	cfg := parseCollectorConfig(t, []byte(configMapData(t, r, "config.yaml")))
	if got := cfg.Receivers.OpenHands.Shard; got != nil {
		t.Errorf("shard %v, want none with shardByOrdinal false", got)
	}
	c := r.statefulSets[0].Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}) {
		t.Errorf("env %+v: want POD_NAME from metadata.name", c.Env)
	}
}

// TestChartOptionalParts: no cockpit file (this branch), no dashboard
// and no PrometheusRule; a cluster without the Prometheus Operator, no
// PrometheusRule and no ServiceMonitor (an install would fail on their
// unknown kinds); everything else always.
func TestChartOptionalParts(t *testing.T) {
	cockpit := map[string]string{"dashboards/agents.json": fixtureDashboard, "rules/alerts.yaml": fixtureRules}
	tests := []struct {
		name                                         string
		cockpit                                      map[string]string
		apis                                         []string
		configMaps, prometheusRules, serviceMonitors int
	}{
		{name: "no cockpit files", apis: operatorAPIs, configMaps: 1, serviceMonitors: 1},
		{name: "no Prometheus Operator", cockpit: cockpit, configMaps: 2},
		{name: "everything", cockpit: cockpit, apis: operatorAPIs, configMaps: 2, prometheusRules: 1, serviceMonitors: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := renderChart(t, chartWithCockpit(t, tt.cockpit), nil, tt.apis...)
			if len(r.statefulSets) != 1 || len(r.services) != 1 || len(r.configMaps) != tt.configMaps ||
				len(r.prometheusRules) != tt.prometheusRules || len(r.serviceMonitors) != tt.serviceMonitors {
				t.Errorf("rendered %d StatefulSets, %d Services, %d ConfigMaps, %d PrometheusRules, %d ServiceMonitors; want 1, 1, %d, %d, %d",
					len(r.statefulSets), len(r.services), len(r.configMaps), len(r.prometheusRules), len(r.serviceMonitors),
					tt.configMaps, tt.prometheusRules, tt.serviceMonitors)
			}
			if got := *r.statefulSets[0].Spec.Replicas; got != 1 {
				t.Errorf("default replicas %d, want 1", got)
			}
		})
	}
}

func TestSyncCockpit(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{name: "dashboard not JSON", files: map[string]string{"dashboards/a.json": "{"}, wantErr: "not valid JSON"},
		{name: "dashboard name not a ConfigMap name", files: map[string]string{"dashboards/Agents_Overview.json": "{}"}, wantErr: "lowercase"},
		{name: "rule file without groups", files: map[string]string{"rules/a.yaml": "groups: []\n"}, wantErr: "no groups"},
		{name: "rule file with an unknown key", files: map[string]string{"rules/a.yaml": fixtureRules + "extra: 1\n"}, wantErr: "unknown field"},
		{name: "rule with an unknown key", files: map[string]string{"rules/a.yaml": strings.Replace(fixtureRules, "        for: 5m", "        fore: 5m", 1)}, wantErr: "unknown field"},
		{name: "promtool test file", files: map[string]string{"rules/a.yaml": "rule_files: [x.yaml]\ntests: []\n"}, wantErr: "unknown field"},
		{name: "group name in two files", files: map[string]string{"rules/a.yaml": fixtureRules, "rules/b.yaml": fixtureRules}, wantErr: "a.yaml has a group of that name too"},
		{name: "dashboard too large for a ConfigMap", files: map[string]string{"dashboards/a.json": `"` + strings.Repeat("x", maxCockpitFile) + `"`}, wantErr: "larger than a ConfigMap"},
		{name: "other files ignored", files: map[string]string{"dashboards/README.md": "#", "rules/notes.txt": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cockpit := writeCockpit(t, tt.files)
			chart := t.TempDir()
			err := SyncCockpit(cockpit, chart)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if entries, _ := filepath.Glob(filepath.Join(chart, "*", "*")); len(entries) != 0 {
					t.Errorf("copied %v", entries)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one saying %q", err, tt.wantErr)
			}
		})
	}

	t.Run("stale files removed", func(t *testing.T) {
		chart := t.TempDir()
		if err := SyncCockpit(writeCockpit(t, map[string]string{"dashboards/old.json": "{}"}), chart); err != nil {
			t.Fatal(err)
		}
		if err := SyncCockpit(writeCockpit(t, map[string]string{"dashboards/new.json": "{}"}), chart); err != nil {
			t.Fatal(err)
		}
		got, _ := filepath.Glob(filepath.Join(chart, "dashboards", "*"))
		if len(got) != 1 || filepath.Base(got[0]) != "new.json" {
			t.Errorf("dashboards %v, want only new.json", got)
		}
	})
}

// TestPackageChart: the archive `make chart` writes loads back as the
// chart, at the release's version, with the cockpit's files in it.
func TestPackageChart(t *testing.T) {
	chart := filepath.Join(t.TempDir(), Name)
	if err := os.CopyFS(chart, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	path, err := PackageChart(writeCockpit(t, map[string]string{"dashboards/agents.json": fixtureDashboard}), chart, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	version, err := ReadVersion(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if c.Metadata.Version != version || !slices.ContainsFunc(c.Files, func(f *helmchart.File) bool { return f.Name == "dashboards/agents.json" }) {
		t.Errorf("%s: version %s, files %d; want %s with dashboards/agents.json", path, c.Metadata.Version, len(c.Files), version)
	}
}

// writeCockpit writes files (path under the cockpit: content) into a new
// cockpit folder.
func writeCockpit(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// chartWithCockpit is a copy of the chart with the cockpit's files synced
// into it, as `make chart` does.
func chartWithCockpit(t *testing.T, files map[string]string) string {
	t.Helper()
	chart := filepath.Join(t.TempDir(), Name)
	if err := os.CopyFS(chart, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	if err := SyncCockpit(writeCockpit(t, files), chart); err != nil {
		t.Fatal(err)
	}
	return chart
}

// renderChart renders the chart at dir as `helm template` would for a
// release named otelcol-openhands, with values over the chart's, for a
// cluster that serves apis beside the built-in ones, and decodes every
// manifest strictly.
func renderChart(t *testing.T, dir string, values map[string]any, apis ...string) rendered {
	t.Helper()
	c, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	caps := *chartutil.DefaultCapabilities
	caps.APIVersions = append(slices.Clone(chartutil.DefaultVersionSet), apis...)
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: Name, Namespace: "observability", IsInstall: true}, &caps)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	var r rendered
	for name, manifest := range out {
		for i, doc := range strings.Split(manifest, "\n---") {
			doc = strings.TrimSpace(doc)
			if doc == "" || doc == "---" {
				continue
			}
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s #%d: %v\n%s", name, i, err, doc)
			}
			var obj any
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 StatefulSet":
				obj = appendNew(&r.statefulSets)
			case "v1 ConfigMap":
				obj = appendNew(&r.configMaps)
			case "v1 Service":
				obj = appendNew(&r.services)
			case "monitoring.coreos.com/v1 PrometheusRule":
				obj = appendNew(&r.prometheusRules)
			case "monitoring.coreos.com/v1 ServiceMonitor":
				obj = appendNew(&r.serviceMonitors)
			default:
				t.Fatalf("%s #%d: unexpected %s %s", name, i, meta.APIVersion, meta.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Errorf("%s #%d: does not decode strictly into %T: %v\n%s", name, i, obj, err, doc)
			}
		}
	}
	return r
}

// appendNew appends a zero T to list and returns it, to be decoded into.
func appendNew[T any](list *[]T) *T {
	*list = append(*list, *new(T))
	return &(*list)[len(*list)-1]
}

// configMapData is the value of key in the one rendered ConfigMap that has it.
func configMapData(t *testing.T, r rendered, key string) string {
	t.Helper()
	var found []string
	for _, cm := range r.configMaps {
		if v, ok := cm.Data[key]; ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d ConfigMaps hold %s, want 1", len(found), key)
	}
	return found[0]
}

// validateConfig runs the built collector's `validate` on a configuration
// with env set.
func validateConfig(t *testing.T, config string, env ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(collectorBinary(t), "validate", "--config="+path)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("otelcol-openhands validate: %v\n%s\n%s", err, out.String(), config)
	}
}
