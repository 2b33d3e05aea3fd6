package distribution

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blakesmith/ar"
	rpmutils "github.com/sassoftware/go-rpmutils"
)

// packagedFile is one file of a package as its format declares it.
type packagedFile struct {
	mode         os.FileMode // permission bits
	owner, group string
	conffile     bool
	body         []byte
}

// packageContents is what a test reads back from a built package.
type packageContents struct {
	files   map[string]packagedFile
	scripts map[string]string // preinstall, postinstall, preremove
	depends []string
	version string
}

// TestPackages builds the deb and the rpm from the built collector and
// reads each back with a reader of its format: the files, their modes and
// owners, which are config files, the maintainer scripts, the unit.
func TestPackages(t *testing.T) {
	b := testBuild(t)
	paths, err := BuildPackages(b, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	binary, err := os.ReadFile(b.Binary)
	if err != nil {
		t.Fatal(err)
	}
	readers := map[string]func(t *testing.T, path string) packageContents{"deb": readDeb, "rpm": readRPM}
	// The preinstall script's groupadd and useradd.
	userTools := map[string]string{"deb": "passwd", "rpm": "shadow-utils"}
	for i, format := range PackageFormats {
		t.Run(format, func(t *testing.T) {
			pkg := readers[format](t, paths[i])
			want := map[string]packagedFile{
				"/usr/bin/" + Name:                         {mode: 0o755, owner: "root", group: "root"},
				"/lib/systemd/system/" + Name + ".service": {mode: 0o644, owner: "root", group: "root"},
				"/etc/" + Name + "/config.yaml":            {mode: 0o644, owner: "root", group: "root", conffile: true},
				"/etc/" + Name + "/" + Name + ".conf":      {mode: 0o600, owner: "root", group: "root", conffile: true},
			}
			for path, w := range want {
				got, ok := pkg.files[path]
				if !ok {
					t.Errorf("%s: missing", path)
					continue
				}
				if got.mode != w.mode || got.owner != w.owner || got.group != w.group || got.conffile != w.conffile {
					t.Errorf("%s: mode %v %s:%s conffile %v, want mode %v %s:%s conffile %v",
						path, got.mode, got.owner, got.group, got.conffile, w.mode, w.owner, w.group, w.conffile)
				}
			}
			for path := range pkg.files {
				if _, ok := want[path]; !ok {
					t.Errorf("%s: a file the test does not expect", path)
				}
			}
			if pkg.version != b.Version {
				t.Errorf("package version %q, VERSION %q", pkg.version, b.Version)
			}
			if !bytes.Equal(pkg.files["/usr/bin/"+Name].body, binary) {
				t.Errorf("/usr/bin/%s is not the built collector %s", Name, b.Binary)
			}
			for _, script := range []string{"preinstall", "postinstall", "preremove"} {
				if !strings.HasPrefix(pkg.scripts[script], "#!/bin/sh\n") {
					t.Errorf("%s script: missing or not a shell script: %.40q", script, pkg.scripts[script])
				}
				sh := exec.Command("sh", "-n")
				sh.Stdin = strings.NewReader(pkg.scripts[script])
				if out, err := sh.CombinedOutput(); err != nil {
					t.Errorf("%s script: sh -n: %v\n%s", script, err, out)
				}
			}
			if !slices.Contains(pkg.depends, userTools[format]) {
				t.Errorf("depends %q: missing %s", pkg.depends, userTools[format])
			}
			if !strings.Contains(pkg.scripts["preinstall"], "useradd --system") {
				t.Errorf("preinstall does not create the service user:\n%s", pkg.scripts["preinstall"])
			}
			checkUnit(t, pkg.files["/lib/systemd/system/"+Name+".service"].body, pkg.files["/etc/"+Name+"/config.yaml"].body)
			verifyUnit(t, pkg.files["/lib/systemd/system/"+Name+".service"].body, b.Binary)
		})
	}
}

// checkUnit checks the hardening the unit promises, and that the default
// configuration keeps its state where the unit lets it write.
func checkUnit(t *testing.T, unit, config []byte) {
	t.Helper()
	directives := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			directives[k] = append(directives[k], v)
		}
	}
	want := map[string]string{
		"User":                  Name,
		"Group":                 Name,
		"EnvironmentFile":       "/etc/" + Name + "/" + Name + ".conf",
		"ExecStart":             "/usr/bin/" + Name + " $OTELCOL_OPTIONS",
		"Restart":               "on-failure",
		"StateDirectory":        Name,
		"NoNewPrivileges":       "true",
		"ProtectSystem":         "strict",
		"ProtectHome":           "true",
		"PrivateTmp":            "true",
		"CapabilityBoundingSet": "",
		"WantedBy":              "multi-user.target",
	}
	for k, v := range want {
		if got := directives[k]; len(got) != 1 || got[0] != v {
			t.Errorf("unit: %s=%q, want %q", k, got, v)
		}
	}
	cfg := parseCollectorConfig(t, config)
	if dir := cfg.Extensions["file_storage"].Directory; dir != "/var/lib/"+Name {
		t.Errorf("config.yaml: file_storage.directory %q is not the unit's StateDirectory /var/lib/%s: ProtectSystem=strict would make it read-only", dir, Name)
	}
}

// verifyUnit runs `systemd-analyze verify` on the unit, with ExecStart
// pointing at the built binary (verify checks that it is executable).
// Any warning fails the test. Skipped only where systemd-analyze is absent.
func verifyUnit(t *testing.T, unit []byte, binary string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not found: the unit was not verified by systemd")
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, Name+".service")
	local := bytes.ReplaceAll(unit, []byte("ExecStart=/usr/bin/"+Name+" "), []byte("ExecStart="+binary+" "))
	if err := os.WriteFile(path, local, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// readDeb reads a .deb: an ar archive of debian-binary, control.tar.gz
// (control, conffiles, maintainer scripts) and data.tar.gz.
func readDeb(t *testing.T, path string) packageContents {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pkg := packageContents{files: map[string]packagedFile{}, scripts: map[string]string{}}
	var conffiles []string
	members := ar.NewReader(f)
	for {
		h, err := members.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch name := strings.TrimSuffix(h.Name, "/"); name {
		case "debian-binary":
		case "control.tar.gz":
			eachGzipTarEntry(t, members, func(h *tar.Header, body []byte) {
				switch strings.TrimPrefix(h.Name, "./") {
				case "conffiles":
					conffiles = strings.Fields(string(body))
				case "control":
					for _, line := range strings.Split(string(body), "\n") {
						if deps, ok := strings.CutPrefix(line, "Depends: "); ok {
							pkg.depends = strings.Split(deps, ", ")
						}
						if v, ok := strings.CutPrefix(line, "Version: "); ok {
							pkg.version = v
						}
					}
				case "preinst":
					pkg.scripts["preinstall"] = string(body)
				case "postinst":
					pkg.scripts["postinstall"] = string(body)
				case "prerm":
					pkg.scripts["preremove"] = string(body)
				}
			})
		case "data.tar.gz":
			eachGzipTarEntry(t, members, func(h *tar.Header, body []byte) {
				if h.Typeflag == tar.TypeReg {
					pkg.files[strings.TrimPrefix(h.Name, ".")] = packagedFile{mode: os.FileMode(h.Mode).Perm(), owner: h.Uname, group: h.Gname, body: body}
				}
			})
		default:
			t.Fatalf("%s: unexpected member %q", path, name)
		}
	}
	for _, c := range conffiles {
		f, ok := pkg.files[c]
		if !ok {
			t.Errorf("conffiles names %s, which the package does not hold", c)
		}
		f.conffile = true
		pkg.files[c] = f
	}
	return pkg
}

// eachGzipTarEntry calls fn with each entry of a gzipped tar archive.
func eachGzipTarEntry(t *testing.T, r io.Reader, fn func(*tar.Header, []byte)) {
	t.Helper()
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	eachTarEntry(t, zr, fn)
}

// eachTarEntry calls fn with each entry of a tar stream and its content.
func eachTarEntry(t *testing.T, r io.Reader, fn func(*tar.Header, []byte)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fn(h, body)
	}
}

// readRPM reads an .rpm: its header (file modes, owners, flags, scripts,
// requirements) and its cpio payload.
func readRPM(t *testing.T, path string) packageContents {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rpm, err := rpmutils.ReadRpm(f)
	if err != nil {
		t.Fatal(err)
	}
	pkg := packageContents{files: map[string]packagedFile{}, scripts: map[string]string{}}
	for tag, script := range map[int]string{rpmutils.PREIN: "preinstall", rpmutils.POSTIN: "postinstall", rpmutils.PREUN: "preremove"} {
		if rpm.Header.HasTag(tag) {
			if pkg.scripts[script], err = rpm.Header.GetString(tag); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pkg.depends, err = rpm.Header.GetStrings(rpmutils.REQUIRENAME); err != nil {
		t.Fatal(err)
	}
	if pkg.version, err = rpm.Header.GetString(rpmutils.VERSION); err != nil {
		t.Fatal(err)
	}
	payload, err := rpm.PayloadReaderExtended()
	if err != nil {
		t.Fatal(err)
	}
	for {
		fi, err := payload.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&0o170000 != 0o100000 { // regular files only
			continue
		}
		body, err := io.ReadAll(payload)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != fi.Digest() {
			t.Errorf("%s: payload does not match the header's digest", fi.Name())
		}
		pkg.files[fi.Name()] = packagedFile{
			mode:  os.FileMode(fi.Mode()).Perm(),
			owner: fi.UserName(),
			group: fi.GroupName(),
			// %config(noreplace): an upgrade keeps a changed file, as
			// dpkg does for every conffile.
			conffile: fi.Flags()&(rpmutils.RPMFILE_CONFIG|rpmutils.RPMFILE_NOREPLACE) == rpmutils.RPMFILE_CONFIG|rpmutils.RPMFILE_NOREPLACE,
			body:     body,
		}
	}
	return pkg
}
