//go:build unix

package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import "syscall"

// descriptorLimit is the process's soft RLIMIT_NOFILE (which the Go
// runtime raises to the hard limit at start).
func descriptorLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fallbackDescriptors
	}
	return rl.Cur
}
