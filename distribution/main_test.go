package distribution

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"sigs.k8s.io/yaml"
)

// binaryEnv overrides where the built collector is, as for
// internal/testing/crashtest.
const binaryEnv = "OTELCOL_OPENHANDS_BIN"

// repoRoot is the repository's root: this module sits in distribution/.
const repoRoot = ".."

// collectorBinary is the built distribution: $OTELCOL_OPENHANDS_BIN, else
// bin/otelcol-openhands at the repository's root. A missing binary fails
// the test (never a skip): `make test` builds it before it tests.
func collectorBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(binaryEnv)
	if bin == "" {
		bin = filepath.Join(repoRoot, "bin", Name)
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the built collector is missing (%v): run `make build` first, or `make test`, which builds it before testing", err)
	}
	return bin
}

// testBuild is what `make package` and `make image` build from.
func testBuild(t *testing.T) Build {
	t.Helper()
	version, err := ReadVersion(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	return Build{Dir: dir, Binary: collectorBinary(t), Version: version, Arch: runtime.GOARCH, Commit: "0123456789ab"}
}

// collectorConfig is what the tests read of a collector configuration.
type collectorConfig struct {
	Extensions map[string]struct {
		Directory string `json:"directory"`
		HTTP      struct {
			Endpoint string `json:"endpoint"`
		} `json:"http"`
	} `json:"extensions"`
	Receivers struct {
		OpenHands struct {
			Shard   map[string]any `json:"shard"`
			Servers []any          `json:"servers"`
			Targets struct {
				HTTPSD []struct {
					Endpoint string `json:"endpoint"`
				} `json:"http_sd"`
				SessionAPIKeyDir string `json:"session_api_key_dir"`
			} `json:"targets"`
			Storage string `json:"storage"`
			Capture struct {
				Level string `json:"level"`
			} `json:"capture"`
		} `json:"openhands"`
	} `json:"receivers"`
	Exporters map[string]any `json:"exporters"`
}

func parseCollectorConfig(t *testing.T, raw []byte) collectorConfig {
	t.Helper()
	var cfg collectorConfig
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// checkSafeDefault checks what a default configuration promises: the
// control gate closed, capture `metadata`, the receiver's state in
// file_storage, and nothing sent off the machine (session logs on disk).
func checkSafeDefault(t *testing.T, cfg collectorConfig) {
	t.Helper()
	if _, ok := cfg.Extensions["openhandscontrol"]; ok {
		t.Error("the default opens the control gate (openhandscontrol is configured)")
	}
	if got := cfg.Receivers.OpenHands.Capture.Level; got != "metadata" {
		t.Errorf("capture level %q, want metadata", got)
	}
	if got := cfg.Receivers.OpenHands.Storage; got != "file_storage" || cfg.Extensions["file_storage"].Directory == "" {
		t.Errorf("receiver storage %q (file_storage directory %q), want file_storage", got, cfg.Extensions["file_storage"].Directory)
	}
	for name := range cfg.Exporters {
		if name != "aepfile" {
			t.Errorf("exporter %s: the default sends nothing off the machine", name)
		}
	}
}

// TestDefaultConfig: the configuration the packages and the image ship
// loads in the built collector, as a package runs it and as the image
// does, and is the safe default.
func TestDefaultConfig(t *testing.T) {
	raw, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkSafeDefault(t, parseCollectorConfig(t, raw))
	t.Run("package", func(t *testing.T) { validateConfig(t, string(raw), "OH_SESSION_API_KEY=k") })
	t.Run("image", func(t *testing.T) { validateConfig(t, string(raw), ImageEnv...) })
}
