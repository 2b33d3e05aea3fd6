// Package cockpit is the distribution's monitoring mixin: the Grafana
// dashboards (dashboards/*.json) and the Prometheus alert and recording
// rules (rules/*.yaml) generated from one set of parameters. `make
// cockpit` (or `go generate ./cockpit`) writes them; a test fails when the
// committed files differ from what the code generates.
package cockpit // import "github.com/otelcol-openhands/otelcol-openhands/cockpit"

//go:generate go run ./cmd/cockpitgen -out .
