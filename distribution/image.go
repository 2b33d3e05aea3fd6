package distribution

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Where things are in the image, and who runs it.
const (
	ImageBinary   = "/" + Name
	ImageConfig   = "/etc/" + Name + "/config.yaml"
	ImageStateDir = "/var/lib/" + Name
	ImageCACerts  = "/etc/ssl/certs/ca-certificates.crt"
	// ImageUID is the image's user and group id: not root, and not a
	// name, so that Kubernetes' runAsNonRoot can check it.
	ImageUID = 10001
	// ImageHealthPort is healthcheckv2's port (the default configuration
	// listens on all interfaces in the image: see ImageEnv).
	ImageHealthPort = 13133
)

// ImageEnv is the image's environment: the default configuration's
// health check listens where a container's port mapping and a kubelet's
// probe reach it.
var ImageEnv = []string{"OTELCOL_HEALTH_ENDPOINT=0.0.0.0:" + strconv.Itoa(ImageHealthPort)}

// BuildImage assembles the OCI image of b (the static binary, CA
// certificates, the default configuration, a non-root user) without a
// Docker daemon, and writes it as an OCI image layout into dir, tagged
// with the release (org.opencontainers.image.ref.name). b.Commit becomes
// the revision label; created is $SOURCE_DATE_EPOCH, else the Unix epoch,
// so that the same inputs give the same digest.
func BuildImage(b Build, dir string) (v1.Image, error) {
	created, err := sourceDate()
	if err != nil {
		return nil, err
	}
	base, err := baseLayerFiles(b.Dir)
	if err != nil {
		return nil, err
	}
	binary, err := os.ReadFile(b.Binary)
	if err != nil {
		return nil, fmt.Errorf("the collector binary: %w", err)
	}
	// The binary gets a layer of its own: it changes with every build,
	// the certificates, user and configuration below it rarely.
	var layers []mutate.Addendum
	for _, files := range [][]imageFile{base, {{path: ImageBinary, mode: 0o755, body: binary}}} {
		l, err := tarLayer(files, created)
		if err != nil {
			return nil, err
		}
		layers = append(layers, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: Name + " distribution.BuildImage"}})
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.Append(img, layers...); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", b.Arch, v1.Time{Time: created}
	labels := imageLabels(b)
	cf.Config = v1.Config{
		User:         strconv.Itoa(ImageUID) + ":" + strconv.Itoa(ImageUID),
		Entrypoint:   []string{ImageBinary},
		Cmd:          []string{"--config=" + ImageConfig},
		Env:          ImageEnv,
		ExposedPorts: map[string]struct{}{strconv.Itoa(ImageHealthPort) + "/tcp": {}},
		Volumes:      map[string]struct{}{ImageStateDir: {}},
		WorkingDir:   ImageStateDir,
		Labels:       labels,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	img = mutate.Annotations(img, labels).(v1.Image)

	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("image layout: %w", err)
	}
	if err := path.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": b.Version})); err != nil {
		return nil, fmt.Errorf("image layout: %w", err)
	}
	return img, nil
}

// imageLabels are the OCI labels (and manifest annotations) of the image.
func imageLabels(b Build) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       Name,
		"org.opencontainers.image.description": "OpenTelemetry Collector distribution for OpenHands agent servers (AEP)",
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.revision":    b.Commit,
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.licenses":    License,
	}
}

// imageFile is one entry of a layer: a directory when body is nil and dir.
type imageFile struct {
	path string
	mode int64
	uid  int
	dir  bool
	body []byte
}

// baseLayerFiles are the image's CA certificates, user, state directory and
// default configuration.
func baseLayerFiles(distDir string) ([]imageFile, error) {
	config, err := os.ReadFile(filepath.Join(distDir, "config.yaml"))
	if err != nil {
		return nil, fmt.Errorf("default configuration: %w", err)
	}
	certs, err := caBundle()
	if err != nil {
		return nil, err
	}
	id := strconv.Itoa(ImageUID)
	return []imageFile{
		{path: "/etc/passwd", mode: 0o644, body: []byte(Name + ":x:" + id + ":" + id + "::" + ImageStateDir + ":/sbin/nologin\n")},
		{path: "/etc/group", mode: 0o644, body: []byte(Name + ":x:" + id + ":\n")},
		{path: ImageCACerts, mode: 0o644, body: certs},
		{path: ImageConfig, mode: 0o644, body: config},
		{path: ImageStateDir, mode: 0o750, uid: ImageUID, dir: true},
		// Go's os.TempDir; the collector writes nothing there today.
		{path: "/tmp", mode: 0o1777, dir: true},
	}, nil
}

// caBundle is the Mozilla (NSS) root store as PEM, from
// golang.org/x/crypto/x509roots/fallback: pinned by go.sum, the same on
// every build machine. Roots that NSS trusts only with constraints a PEM
// file cannot carry (distrust after a date) are left out.
func caBundle() ([]byte, error) {
	var out bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
	}
	if out.Len() == 0 {
		return nil, fmt.Errorf("CA certificates: the bundle is empty")
	}
	return out.Bytes(), nil
}

// tarLayer is an OCI layer (gzip) of files, their parent directories
// added, every time set to mtime, owned by root unless uid says otherwise.
func tarLayer(files []imageFile, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	for _, f := range files {
		for _, d := range parents(f.path) {
			if seen[d] {
				continue
			}
			seen[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		name := f.path[1:]
		h := &tar.Header{Name: name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: mtime, Format: tar.FormatPAX}
		if f.dir {
			seen[name] = true
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// parents are the directories above an absolute path, outermost first,
// without the leading slash: "/etc/ssl/certs/x" gives etc, etc/ssl,
// etc/ssl/certs.
func parents(path string) []string {
	var out []string
	for d := filepath.Dir(path); d != "/"; d = filepath.Dir(d) {
		out = append([]string{d[1:]}, out...)
	}
	return out
}

// sourceDate is $SOURCE_DATE_EPOCH (reproducible builds), else the Unix
// epoch.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
	}
	return time.Unix(sec, 0).UTC(), nil
}
