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
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

var chartDir = filepath.Join(repoRoot, "charts", Name)

// releaseNamespace is where the tests install the chart.
const releaseNamespace = "observability"

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
	deployments     []appsv1.Deployment
	configMaps      []corev1.ConfigMap
	services        []corev1.Service
	serviceAccounts []corev1.ServiceAccount
	roles           []rbacv1.Role
	roleBindings    []rbacv1.RoleBinding
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
	if len(r.deployments)+len(r.serviceAccounts)+len(r.roles)+len(r.roleBindings) != 0 {
		t.Errorf("the default renders a Target Allocator: %d Deployments, %d ServiceAccounts, %d Roles, %d RoleBindings",
			len(r.deployments), len(r.serviceAccounts), len(r.roles), len(r.roleBindings))
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
	out, err := renderManifests(t, dir, values, apis...)
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
			case "apps/v1 Deployment":
				obj = appendNew(&r.deployments)
			case "v1 ServiceAccount":
				obj = appendNew(&r.serviceAccounts)
			case "rbac.authorization.k8s.io/v1 Role":
				obj = appendNew(&r.roles)
			case "rbac.authorization.k8s.io/v1 RoleBinding":
				obj = appendNew(&r.roleBindings)
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

// renderManifests renders the chart at dir as renderChart does and
// returns the manifests by template, or the render's error (a `fail` or
// `required` of the chart).
func renderManifests(t *testing.T, dir string, values map[string]any, apis ...string) (map[string]string, error) {
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
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: Name, Namespace: releaseNamespace, IsInstall: true}, &caps)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Render(c, vals)
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

// targetAllocatorValues are the chart's example values for the Target
// Allocator shape (the README points at them): a job "openhands" over an
// http_sd list of keyed agent servers, their key files in a Secret, and a
// job "openhands-keyless" over agent-server pods in openhands-sandboxes.
func targetAllocatorValues(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "examples", "values-target-allocator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.UnmarshalStrict(raw, &values); err != nil {
		t.Fatal(err)
	}
	return values
}

// targetAllocatorConfig mirrors the fields of the Target Allocator's
// configuration file (opentelemetry-operator cmd/otel-allocator
// internal/config.Config) the chart sets; a misspelt key fails the strict
// decode.
type targetAllocatorConfig struct {
	CollectorNamespace string                `json:"collector_namespace"`
	CollectorSelector  *metav1.LabelSelector `json:"collector_selector"`
	AllocationStrategy string                `json:"allocation_strategy"`
	FilterStrategy     string                `json:"filter_strategy"`
	Config             struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	} `json:"config"`
}

// TestChartTargetAllocator renders the Target Allocator shape: the
// allocator counts exactly the StatefulSet's pods as its collectors and
// may read them and the agent servers' namespace; each replica reads its
// share by pod name from the allocator's Service, takes no static shard
// and no static server, finds the key files where the Secret is mounted;
// the built collector validates the configuration.
func TestChartTargetAllocator(t *testing.T) {
	r := renderChart(t, chartWithCockpit(t, nil), targetAllocatorValues(t), operatorAPIs...)
	if len(r.statefulSets) != 1 || len(r.deployments) != 1 || len(r.services) != 2 || len(r.serviceAccounts) != 1 {
		t.Fatalf("rendered %d StatefulSets, %d Deployments, %d Services, %d ServiceAccounts; want 1, 1, 2, 1",
			len(r.statefulSets), len(r.deployments), len(r.services), len(r.serviceAccounts))
	}
	sts, ta, sa := r.statefulSets[0], r.deployments[0], r.serviceAccounts[0]

	var taCfg targetAllocatorConfig
	if err := yaml.UnmarshalStrict([]byte(configMapData(t, r, "targetallocator.yaml")), &taCfg); err != nil {
		t.Fatalf("the allocator's configuration: %v", err)
	}
	collectors, err := metav1.LabelSelectorAsSelector(taCfg.CollectorSelector)
	if err != nil || taCfg.CollectorSelector == nil || len(taCfg.CollectorSelector.MatchLabels) == 0 {
		t.Fatalf("collector_selector %+v (%v): must select the StatefulSet's pods", taCfg.CollectorSelector, err)
	}
	if !collectors.Matches(labels.Set(sts.Spec.Template.Labels)) || collectors.Matches(labels.Set(ta.Spec.Template.Labels)) {
		t.Errorf("collector_selector %s: must match the collectors' pods (%v) and not the allocator's (%v)",
			collectors, sts.Spec.Template.Labels, ta.Spec.Template.Labels)
	}
	if taCfg.CollectorNamespace != releaseNamespace || taCfg.AllocationStrategy != "consistent-hashing" ||
		taCfg.FilterStrategy != "relabel-config" || len(taCfg.Config.ScrapeConfigs) != 2 {
		t.Errorf("allocator configuration %+v: want the release's namespace, consistent-hashing, relabel-config and the example's two jobs", taCfg)
	}

	taPod := ta.Spec.Template.Spec
	if taPod.ServiceAccountName != sa.Name || len(taPod.Containers) != 1 {
		t.Fatalf("allocator pod: service account %q (want %q), %d containers", taPod.ServiceAccountName, sa.Name, len(taPod.Containers))
	}
	var taService corev1.Service
	for _, svc := range r.services {
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(ta.Spec.Template.Labels)) {
			taService = svc
		}
	}
	if taService.Name == "" || len(taService.Name) > 63 || len(taService.Spec.Ports) != 1 ||
		taService.Spec.Ports[0].TargetPort.StrVal != taPod.Containers[0].Ports[0].Name || taPod.Containers[0].Ports[0].ContainerPort != 8080 {
		t.Fatalf("allocator Service %+v: want one port to the allocator's 8080", taService)
	}

	// The allocator reads pods (its collectors, and the agent servers for
	// kubernetes_sd) in the release's namespace and the sandboxes'.
	for _, ns := range []string{releaseNamespace, "openhands-sandboxes"} {
		if !grants(r, sa, ns, "pods", "list", "watch") {
			t.Errorf("namespace %s: the allocator's ServiceAccount may not list and watch pods", ns)
		}
	}

	pod := sts.Spec.Template.Spec
	c := pod.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if ref := env["POD_NAME"].ValueFrom; ref == nil || ref.FieldRef == nil || ref.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME: %+v, want the pod's name through the downward API", env["POD_NAME"])
	}
	if _, ok := env["SHARD_INDEX"]; ok {
		t.Error("SHARD_INDEX is set: no static shard with the allocator")
	}

	config := configMapData(t, r, "config.yaml")
	cfg := parseCollectorConfig(t, []byte(config))
	checkSafeDefault(t, cfg)
	oh := cfg.Receivers.OpenHands
	if oh.Shard != nil || oh.Servers != nil {
		t.Errorf("shard %v, servers %v: the allocator shares the servers out, a replica takes no shard and no static server", oh.Shard, oh.Servers)
	}
	var endpoints []string
	for _, sd := range oh.Targets.HTTPSD {
		endpoints = append(endpoints, sd.Endpoint)
	}
	if want := []string{
		"http://" + taService.Name + "/jobs/openhands/targets?collector_id=${env:POD_NAME}",
		"http://" + taService.Name + "/jobs/openhands-keyless/targets?collector_id=${env:POD_NAME}",
	}; !slices.Equal(endpoints, want) {
		t.Errorf("http_sd at %v, want one per job: %v", endpoints, want)
	}
	keysVolume := ""
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "openhands-session-keys" {
			keysVolume = v.Name
		}
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == keysVolume && m.MountPath == oh.Targets.SessionAPIKeyDir && m.ReadOnly
	}) {
		t.Errorf("session_api_key_dir %q is not where the keys Secret is mounted (%+v)", oh.Targets.SessionAPIKeyDir, c.VolumeMounts)
	}
	validateConfig(t, config, "POD_NAME=otelcol-openhands-0", "MY_POD_IP=127.0.0.1")
}

// grants says whether a RoleBinding in ns gives sa a Role there that
// allows verbs on resource (of the core API group).
func grants(r rendered, sa corev1.ServiceAccount, ns, resource string, verbs ...string) bool {
	for _, rb := range r.roleBindings {
		if rb.Namespace != ns || rb.RoleRef.Kind != "Role" || !slices.ContainsFunc(rb.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa.Name && s.Namespace == releaseNamespace
		}) {
			continue
		}
		for _, role := range r.roles {
			if role.Namespace != ns || role.Name != rb.RoleRef.Name {
				continue
			}
			for _, rule := range role.Rules {
				if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, resource) &&
					!slices.ContainsFunc(verbs, func(v string) bool { return !slices.Contains(rule.Verbs, v) }) {
					return true
				}
			}
		}
	}
	return false
}

// TestChartTargetAllocatorRefused: values the Target Allocator shape
// cannot honour fail the install with the key to fix.
func TestChartTargetAllocatorRefused(t *testing.T) {
	chart := chartWithCockpit(t, nil)
	tests := []struct {
		name    string
		edit    func(values map[string]any)
		wantErr string
	}{
		{name: "no scrape job", edit: func(v map[string]any) { ta(v)["scrapeConfigs"] = []any{} }, wantErr: "targetAllocator.scrapeConfigs: name how the allocator discovers"},
		{name: "a static shard", edit: func(v map[string]any) {
			v["config"] = map[string]any{"receivers": map[string]any{"openhands": map[string]any{"shard": map[string]any{"count": 3}}}}
		}, wantErr: "config.receivers.openhands.shard: leave it out"},
		{name: "kubernetes_sd in every namespace", edit: func(v map[string]any) {
			delete(job(v, 1)["kubernetes_sd_configs"].([]any)[0].(map[string]any), "namespaces")
		}, wantErr: "openhands-keyless: kubernetes_sd_configs must name its namespaces"},
		{name: "a job name that is no path segment", edit: func(v map[string]any) { job(v, 0)["job_name"] = "open hands/x" }, wantErr: "letters, digits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values := targetAllocatorValues(t)
			tt.edit(values)
			_, err := renderManifests(t, chart, values)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("render error %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
}

// ta and job are the targetAllocator values and their i-th scrape job.
func ta(values map[string]any) map[string]any { return values["targetAllocator"].(map[string]any) }
func job(values map[string]any, i int) map[string]any {
	return ta(values)["scrapeConfigs"].([]any)[i].(map[string]any)
}
