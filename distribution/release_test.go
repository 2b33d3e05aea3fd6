package distribution

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestOneVersion: every place that names the release names VERSION's:
// ocb's dist.version (what --version prints), the chart, the gomod lines
// and image tags the READMEs tell users to write, the changelog's latest
// release. The packages and the image take it from VERSION itself
// (TestPackages, TestImage).
func TestOneVersion(t *testing.T) {
	version, err := ReadVersion(repoRoot)
	if err != nil {
		t.Fatal(err)
	}

	var builder struct {
		Dist struct {
			Version string `json:"version"`
		} `json:"dist"`
	}
	readYAML(t, filepath.Join(repoRoot, "builder-config.yaml"), &builder)
	if builder.Dist.Version != version {
		t.Errorf("builder-config.yaml: dist.version %q, VERSION %q", builder.Dist.Version, version)
	}

	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, filepath.Join(chartDir, "Chart.yaml"), &chart)
	if chart.Version != version || chart.AppVersion != version {
		t.Errorf("Chart.yaml: version %q, appVersion %q; VERSION %q", chart.Version, chart.AppVersion, version)
	}

	// What users copy: `gomod: <our module> vX` and `image: otelcol-openhands:X`.
	mentions := regexp.MustCompile(`gomod: github\.com/otelcol-openhands/otelcol-openhands (v\S+)|image: otelcol-openhands:(\S+)`)
	found := 0
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "build" || d.Name() == "dist" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(path) != ".md" || filepath.Base(path) == "CHANGELOG.md" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range mentions.FindAllStringSubmatch(string(raw), -1) {
			found++
			if got := m[1] + m[2]; got != "v"+version && got != version {
				t.Errorf("%s: %q names release %s, VERSION %s", path, m[0], got, version)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Error("no gomod line in any README: the pattern no longer matches what they say")
	}

	changelog, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	latest := regexp.MustCompile(`(?m)^## v(\S+)`).FindSubmatch(changelog)
	if latest == nil || string(latest[1]) != version {
		t.Errorf("CHANGELOG.md: latest release %q, VERSION %s", latest, version)
	}
}

// TestVersionFlag: the built collector's --version names the release and
// the commit it was built from.
func TestVersionFlag(t *testing.T) {
	version, err := ReadVersion(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(collectorBinary(t), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	want := regexp.MustCompile(`^` + Name + ` version ` + regexp.QuoteMeta(version) + `\+[0-9a-f]{7,40}\n$`)
	if !want.Match(out) {
		t.Errorf("--version printed %q, want %q", out, want)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
