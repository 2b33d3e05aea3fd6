// Package cockpitcheck proves the cockpit (the repository's cockpit/
// bundle) against what the built distribution really exposes: it runs
// the demo scenarios and a fault scenario through bin/otelcol-openhands,
// scrapes the prometheus exporter and the collector's own telemetry, and
// fails when a dashboard or rule query names a metric or label that never
// appeared; a real Prometheus server scrapes the fault scenario with the
// rules loaded and the named alerts must fire. The package has no
// non-test code.
package cockpitcheck
