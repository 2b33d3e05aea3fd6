//go:build !unix

package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

// descriptorLimit: without RLIMIT_NOFILE, assume the common default.
func descriptorLimit() uint64 { return fallbackDescriptors }
