// Package distribution builds what an operator installs: the deb and rpm
// packages (BuildPackages, nfpm), the OCI image (BuildImage,
// go-containerregistry, no Docker daemon) and the Helm chart with the
// cockpit's dashboards and rules in it (SyncCockpit, PackageChart), all from
// the collector `make build` made and the one version in ../VERSION.
// cmd/dist is their command line (the Makefile's package, image and chart
// targets).
//
// It is a module of its own so that nfpm, go-containerregistry and Helm
// stay out of the collector's dependency graph.
package distribution
