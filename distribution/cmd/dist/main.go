// Command dist builds the distribution's packages, image and chart from the
// built collector: the Makefile's package, image and chart targets.
//
//	go run ./cmd/dist -root .. -binary ../bin/otelcol-openhands -out ../dist package|image|chart
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/otelcol-openhands/otelcol-openhands/distribution"
)

func main() {
	root := flag.String("root", "..", "the repository's root (VERSION, distribution/, charts/, cockpit/)")
	binary := flag.String("binary", "../bin/otelcol-openhands", "the collector `make build` made")
	commit := flag.String("commit", "unknown", "the source revision the binary was built from")
	out := flag.String("out", "../dist", "where the packages, the image layout and the chart archive go")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: dist [flags] package|image|chart\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *root, *binary, *commit, *out); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

func run(what, root, binary, commit, out string) error {
	version, err := distribution.ReadVersion(root)
	if err != nil {
		return err
	}
	b := distribution.Build{
		Dir:     filepath.Join(root, "distribution"),
		Binary:  binary,
		Version: version,
		Arch:    runtime.GOARCH,
		Commit:  commit,
	}
	switch what {
	case "package":
		paths, err := distribution.BuildPackages(b, out)
		for _, p := range paths {
			fmt.Println(p)
		}
		return err
	case "image":
		dir := filepath.Join(out, "image")
		img, err := distribution.BuildImage(b, dir)
		if err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s (OCI layout, tag %s): %s\n", dir, version, digest)
		return nil
	case "chart":
		path, err := distribution.PackageChart(filepath.Join(root, "cockpit"), filepath.Join(root, "charts", distribution.Name), out)
		if err != nil {
			return err
		}
		fmt.Println(path)
		return nil
	}
	return fmt.Errorf("unknown target %q: package, image or chart", what)
}
