package distribution

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
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
