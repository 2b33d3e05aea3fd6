package distribution

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestImage builds the image, reads it back from its OCI layout and checks
// what a runtime and a registry see: the tag, the config (user,
// entrypoint, ports, volume, labels) and the files, the binary being the
// one built.
func TestImage(t *testing.T) {
	b := testBuild(t)
	dir := filepath.Join(t.TempDir(), "image")
	built, err := BuildImage(b, dir)
	if err != nil {
		t.Fatal(err)
	}
	img := imageTagged(t, dir, b.Version)
	if got, want := digestOf(t, img), digestOf(t, built); got != want {
		t.Fatalf("layout holds %s, BuildImage returned %s", got, want)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != b.Arch {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, b.Arch)
	}
	if uid, _, _ := strings.Cut(c.User, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("user %q: the image must not run as root", c.User)
	}
	if _, err := strconv.Atoi(strings.Split(c.User, ":")[0]); err != nil {
		t.Errorf("user %q: numeric, so that runAsNonRoot can check it", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/" + Name}) {
		t.Errorf("entrypoint %q", c.Entrypoint)
	}
	if !slices.Equal(c.Cmd, []string{"--config=/etc/" + Name + "/config.yaml"}) {
		t.Errorf("cmd %q", c.Cmd)
	}
	if _, ok := c.ExposedPorts["13133/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want the health check's 13133/tcp", c.ExposedPorts)
	}
	if _, ok := c.Volumes["/var/lib/"+Name]; !ok {
		t.Errorf("volumes %v, want the state directory", c.Volumes)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  b.Version,
		"org.opencontainers.image.revision": b.Commit,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.licenses": License,
	} {
		if c.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, c.Labels[k], v)
		}
	}

	files := imageFiles(t, img)
	binary, err := os.ReadFile(b.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sha256.Sum256(files["otelcol-openhands"].body), sha256.Sum256(binary); got != want {
		t.Errorf("/%s in the image has sha256 %x, the built collector %x", Name, got, want)
	}
	checkStatic(t, b.Binary)
	if h := files["otelcol-openhands"].header; h.Mode&0o111 == 0 {
		t.Errorf("/%s is not executable: mode %o", Name, h.Mode)
	}
	config, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files["etc/otelcol-openhands/config.yaml"].body, config) {
		t.Error("/etc/otelcol-openhands/config.yaml is not distribution/config.yaml")
	}
	if n := countCertificates(t, files["etc/ssl/certs/ca-certificates.crt"].body); n < 100 {
		t.Errorf("/etc/ssl/certs/ca-certificates.crt: %d roots, want the Mozilla store (over 100)", n)
	}
	uid := strings.Split(c.User, ":")[0]
	if !strings.Contains(string(files["etc/passwd"].body), ":x:"+uid+":"+uid+":") {
		t.Errorf("/etc/passwd has no entry for the user %s:\n%s", uid, files["etc/passwd"].body)
	}
	state := files["var/lib/"+Name+"/"].header
	if state == nil || strconv.Itoa(state.Uid) != uid {
		t.Errorf("/var/lib/%s: not a directory the user %s owns: %+v", Name, uid, state)
	}

	// The same inputs give the same image.
	again, err := BuildImage(b, filepath.Join(t.TempDir(), "image"))
	if err != nil {
		t.Fatal(err)
	}
	if digestOf(t, again) != digestOf(t, img) {
		t.Error("two builds of the same inputs differ")
	}
}

// imageTagged is the image of the layout at dir whose ref.name is tag.
func imageTagged(t *testing.T, dir, tag string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] == tag {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("the layout at %s has no image tagged %s: %+v", dir, tag, m.Manifests)
	return nil
}

func digestOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// layerEntry is an entry of the image's file system.
type layerEntry struct {
	header *tar.Header
	body   []byte
}

// imageFiles is the image's file system: its layers applied in order (no
// whiteouts: BuildImage writes none).
func imageFiles(t *testing.T, img v1.Image) map[string]layerEntry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]layerEntry{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		eachTarEntry(t, rc, func(h *tar.Header, body []byte) {
			files[h.Name] = layerEntry{header: h, body: body}
		})
		rc.Close()
	}
	return files
}

// countCertificates parses every PEM block of a CA bundle as a
// certificate, failing the test on one that is not.
func countCertificates(t *testing.T, bundle []byte) int {
	t.Helper()
	n := 0
	for block, rest := pem.Decode(bundle); block != nil; block, rest = pem.Decode(rest) {
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Errorf("CA bundle, certificate %d: %v", n, err)
		}
		n++
	}
	return n
}

// checkStatic fails the test when binary asks for a dynamic loader: the
// image has no libc (build it with CGO_ENABLED=0, as `make build` does).
func checkStatic(t *testing.T, binary string) {
	t.Helper()
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is linked dynamically (it names an interpreter): the image has no libc", binary)
		}
	}
}
