package distribution

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// PackageFormats are the package formats BuildPackages writes.
var PackageFormats = []string{"deb", "rpm"}

// Build is what the distribution is assembled from.
type Build struct {
	// Dir is this folder (distribution/): nfpm.yaml, config.yaml, linux/.
	Dir string
	// Binary is the collector `make build` made (static, CGO_ENABLED=0).
	Binary string
	// Version is the release (ReadVersion).
	Version string
	// Arch is the binary's GOARCH.
	Arch string
	// Commit is the source revision the binary was built from.
	Commit string
}

// BuildPackages writes one package per format of PackageFormats into out
// and returns their paths, in that order.
func BuildPackages(b Build, out string) ([]string, error) {
	if _, err := os.Stat(b.Binary); err != nil {
		return nil, fmt.Errorf("the collector binary: %w", err)
	}
	vars := map[string]string{
		"VERSION": b.Version,
		"BINARY":  b.Binary,
		"ARCH":    b.Arch,
		"SOURCE":  Source,
	}
	config, err := nfpm.ParseFileWithEnvMapping(filepath.Join(b.Dir, "nfpm.yaml"), func(name string) string {
		return vars[name] // an unknown name expands to "" and fails Validate or the file lookup
	})
	if err != nil {
		return nil, fmt.Errorf("nfpm.yaml: %w", err)
	}
	config.License = License
	inDir(b.Dir, &config.Scripts.PreInstall, &config.Scripts.PostInstall, &config.Scripts.PreRemove)
	for _, c := range config.Contents {
		inDir(b.Dir, &c.Source)
	}
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("nfpm.yaml: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, format := range PackageFormats {
		path, err := buildPackage(&config, format, out)
		if err != nil {
			return nil, fmt.Errorf("%s package: %w", format, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func buildPackage(config *nfpm.Config, format, out string) (path string, err error) {
	packager, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	info, err := config.Get(format)
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	path = filepath.Join(out, packager.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	return path, packager.Package(info, f)
}

// inDir makes each relative path relative to dir, as nfpm run in dir
// would read it.
func inDir(dir string, paths ...*string) {
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}
