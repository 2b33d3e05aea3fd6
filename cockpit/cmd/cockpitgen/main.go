// Command cockpitgen writes the cockpit bundle (dashboards/*.json,
// rules/*.yaml) into a directory: `make cockpit` regenerates the committed
// one; an operator retunes the thresholds with -params, a JSON object of
// the cockpit.Params fields to change, e.g. {"daily_budget": 250}.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/otelcol-openhands/otelcol-openhands/cockpit"
)

func main() {
	out := flag.String("out", "cockpit", "the bundle's root directory")
	paramsFile := flag.String("params", "", "a JSON file of parameters overriding the defaults")
	flag.Parse()
	if err := run(*out, *paramsFile); err != nil {
		fmt.Fprintln(os.Stderr, "cockpitgen:", err)
		os.Exit(1)
	}
}

func run(out, paramsFile string) error {
	p := cockpit.DefaultParams()
	if paramsFile != "" {
		raw, err := os.ReadFile(paramsFile)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("%s: %w", paramsFile, err)
		}
	}
	return cockpit.Write(out, p)
}
