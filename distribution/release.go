package distribution

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Name is the distribution's name: the binary, the packages, the service
// user, the configuration directory, the image and the chart.
const Name = "otelcol-openhands"

// Source and License are the image's OCI labels and the packages' metadata.
const (
	Source  = "https://github.com/otelcol-openhands/otelcol-openhands"
	License = "Apache-2.0"
)

// semver is a release as the VERSION file holds it: MAJOR.MINOR.PATCH with
// an optional pre-release.
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// ReadVersion reads the release from root/VERSION: the one version string
// the binary, the packages, the image, the chart and the README's gomod
// lines carry.
func ReadVersion(root string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", fmt.Errorf("read the release: %w", err)
	}
	v := strings.TrimSpace(string(raw))
	if !semver.MatchString(v) {
		return "", fmt.Errorf("VERSION: %q is not a semantic version (MAJOR.MINOR.PATCH)", v)
	}
	return v, nil
}
