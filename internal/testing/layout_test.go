// Package layout holds the layout of the module to one rule: what ships
// never imports what only tests. Everything under internal/testing/, and
// every helper package named like httptest (aeptest, configchecktest, ...),
// is for tests; a test may import it, product code may not.
package layout

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testOnly reports whether the package at path, in module, is a test
// double, harness or helper.
func testOnly(module, path string) bool {
	if !strings.HasPrefix(path, module+"/") {
		return false
	}
	if strings.HasPrefix(path, module+"/internal/testing/") {
		return true
	}
	return strings.HasSuffix(path[strings.LastIndex(path, "/")+1:], "test")
}

// productImports parses lines of "importpath module imports..." (go list's
// non-test imports) and returns one "importer imports imported" for each
// import of a test-only package by a package that is not one.
func productImports(listing []byte) []string {
	var found []string
	lines := bufio.NewScanner(bytes.NewReader(listing))
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 2 {
			continue
		}
		pkg, module := fields[0], fields[1]
		if testOnly(module, pkg) {
			continue
		}
		for _, imported := range fields[2:] {
			if testOnly(module, imported) {
				found = append(found, fmt.Sprintf("%s imports %s", pkg, imported))
			}
		}
	}
	return found
}

// TestProductImportsNoTestPackage lists every package of the module with
// its non-test imports, and fails naming each product package that imports
// a test-only one.
func TestProductImportsNoTestPackage(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go binary to list the module's packages")
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Module.Path}} {{join .Imports " "}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	if found := productImports(out); len(found) > 0 {
		t.Errorf("product code imports a package only tests may import (move the code it needs out of internal/testing or the *test package):\n%s",
			strings.Join(found, "\n"))
	}
}

func TestProductImports(t *testing.T) {
	const m = "example.com/m"
	tests := []struct {
		name    string
		listing string
		want    []string
	}{
		{
			name:    "product imports product",
			listing: m + "/receiver/r " + m + " " + m + "/internal/aep context",
		},
		{
			name:    "product imports a double",
			listing: m + "/receiver/r " + m + " " + m + "/internal/testing/openhandstest",
			want:    []string{m + "/receiver/r imports " + m + "/internal/testing/openhandstest"},
		},
		{
			name:    "product imports a helper package",
			listing: m + "/exporter/e " + m + " " + m + "/internal/aep/aeptest",
			want:    []string{m + "/exporter/e imports " + m + "/internal/aep/aeptest"},
		},
		{
			name:    "a harness imports a double",
			listing: m + "/internal/testing/e2e " + m + " " + m + "/internal/testing/aeprelaytest",
		},
		{
			name:    "a helper package imports a double",
			listing: m + "/internal/aep/aeptest " + m + " " + m + "/internal/testing/stream",
		},
		{
			name:    "another module's test package is not ours to police",
			listing: m + "/receiver/r " + m + " go.opentelemetry.io/collector/component/componenttest",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, productImports([]byte(tt.listing+"\n")))
		})
	}
}
