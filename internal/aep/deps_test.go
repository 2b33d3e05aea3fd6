package aep

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOnlyPdataFromTheCollector keeps the AEP core reusable outside a
// collector: its non-test code may import no collector module but pdata.
func TestOnlyPdataFromTheCollector(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "go.opentelemetry.io/collector/") {
				assert.True(t, strings.HasPrefix(p, "go.opentelemetry.io/collector/pdata/"), "%s imports %s", path, p)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, checked, 10, "the walk found the package sources")
}
