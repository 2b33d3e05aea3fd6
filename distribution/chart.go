package distribution

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

// cockpitFiles are the cockpit's files the chart carries: the folder under
// the cockpit and the chart, and the files' extension.
var cockpitFiles = []struct{ dir, ext string }{
	{"dashboards", ".json"},
	{"rules", ".yaml"},
}

// cockpitName is what a cockpit file may be called: its name, less the
// extension, becomes part of a ConfigMap's name (DNS-1123).
var cockpitName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// maxCockpitFile keeps a dashboard inside one ConfigMap (1 MiB in all).
const maxCockpitFile = 900 << 10

// SyncCockpit makes the chart's dashboards/ and rules/ hold exactly the
// cockpit's dashboards/*.json and rules/*.yaml. A missing cockpit folder
// means none. A file that does not parse, or whose name cannot name a
// ConfigMap, or too large for one, or a rule group that a PrometheusRule
// cannot hold (an unknown field, a name another file already used), fails
// with its path.
func SyncCockpit(cockpit, chart string) error {
	// The rule groups seen so far: they become one PrometheusRule, whose
	// group names must be unique.
	groups := map[string]string{} // name: the file that has it
	for _, kind := range cockpitFiles {
		dst := filepath.Join(chart, kind.dir)
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		srcs, err := filepath.Glob(filepath.Join(cockpit, kind.dir, "*"+kind.ext))
		if err != nil {
			return err
		}
		if len(srcs) == 0 {
			continue
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		for _, src := range srcs {
			body, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			if err := checkCockpitFile(src, kind.ext, body, groups); err != nil {
				return fmt.Errorf("%s: %w", src, err)
			}
			if err := os.WriteFile(filepath.Join(dst, filepath.Base(src)), body, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkCockpitFile(path, ext string, body []byte, groups map[string]string) error {
	if base := strings.TrimSuffix(filepath.Base(path), ext); !cockpitName.MatchString(base) || len(base) > 200 {
		return fmt.Errorf("the name must be lowercase letters, digits and dashes (it names a ConfigMap)")
	}
	if len(body) > maxCockpitFile {
		return fmt.Errorf("%d bytes: larger than a ConfigMap holds (%d)", len(body), maxCockpitFile)
	}
	switch ext {
	case ".json":
		if !json.Valid(body) {
			return fmt.Errorf("not valid JSON")
		}
	case ".yaml":
		var rules monitoringv1.PrometheusRuleSpec
		if err := yaml.UnmarshalStrict(body, &rules); err != nil {
			return fmt.Errorf("not a rule file a PrometheusRule can hold: %w", err)
		}
		if len(rules.Groups) == 0 {
			return fmt.Errorf("not a rule file a PrometheusRule can hold: no groups")
		}
		for _, g := range rules.Groups {
			if other, ok := groups[g.Name]; ok {
				return fmt.Errorf("rule group %q: %s has a group of that name too (one PrometheusRule holds them all)", g.Name, other)
			}
			groups[g.Name] = path
		}
	}
	return nil
}

// PackageChart syncs the cockpit's files into the chart, then writes the
// chart's archive (name-version.tgz) into out and returns its path.
func PackageChart(cockpit, chart, out string) (string, error) {
	if err := SyncCockpit(cockpit, chart); err != nil {
		return "", err
	}
	c, err := loader.LoadDir(chart)
	if err != nil {
		return "", fmt.Errorf("load the chart: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	return chartutil.Save(c, out)
}
