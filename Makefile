# Everything a newcomer needs, with nothing pre-installed beyond Go.
GO          ?= go
OCB_VERSION := v0.165.0
TOOLS_DIR   := $(CURDIR)/.tools
OCB         := $(TOOLS_DIR)/builder
STATICCHECK := $(TOOLS_DIR)/staticcheck
# Prometheus' own promtool and server: the cockpit's rules are checked,
# unit-tested and run against the demo collector with them.
PROMETHEUS_VERSION := v0.316.0
PROMTOOL    := $(TOOLS_DIR)/promtool
PROMETHEUS  := $(TOOLS_DIR)/prometheus
DIST_DIR    := $(CURDIR)/build/otelcol-openhands
BIN         := $(CURDIR)/bin/otelcol-openhands
GOTEST      := $(GO) test -race -count=1

# The release (one string: the binary, the packages, the image, the chart,
# the README's gomod lines; distribution/release_test.go checks they agree)
# and the commit the binary is built from.
VERSION     := $(shell cat VERSION)
COMMIT      ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
# Packages, the image layout and the chart archive.
OUT_DIR     := $(CURDIR)/dist
DIST_CMD    := cd distribution && $(GO) run ./cmd/dist -root $(CURDIR) -binary $(BIN) -commit $(COMMIT) -out $(OUT_DIR)

# The real agent server `make live-test` runs: pinned here, installed once
# into a virtualenv outside the repository and reused while it matches.
OH_SERVER_VERSION := 1.58.2
OH_VENV     ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/otelcol-openhands/venv-$(OH_SERVER_VERSION)
LIVE_TEST   := OH_PYTHON=$(OH_VENV)/bin/python OTELCOL_BIN=$(BIN) $(GOTEST) -tags live -timeout 15m -run '^TestLive(Control|Tree|Webhook|Targets|Policy)?$$' -v ./internal/testing/livetest/

.PHONY: all build test unit-test dist-test package image chart lint bench bench-e2e demo demo-control demo-fleet demo-govern clean venv live-test record cockpit tools

all: lint test

$(OCB):
	GOBIN=$(TOOLS_DIR) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)

# build generates the distribution's sources with ocb, then compiles them
# into a static binary (the image has no libc). ocb writes the release
# (dist.version) into main.go as a literal: the build appends the commit,
# linked in with -X, so that --version prints both (0.1.0+<commit>).
build: $(OCB)
	mkdir -p $(DIST_DIR)
	$(OCB) --config=builder-config.yaml --skip-compilation
	sed -i 's/^\(\t*Version: *"[^"]*\)",$$/\1+" + commit,/' $(DIST_DIR)/main.go
	@grep -q '+" + commit,' $(DIST_DIR)/main.go || { echo "build: ocb's main.go has no Version line to stamp the commit on"; exit 1; }
	printf 'package main\n\n// commit is the source revision, set at link time.\nvar commit = "unknown"\n' > $(DIST_DIR)/commit.go
	cd $(DIST_DIR) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-X main.commit=$(COMMIT)' -o $(BIN) .

$(PROMTOOL) $(PROMETHEUS) &:
	GOBIN=$(TOOLS_DIR) $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VERSION) github.com/prometheus/prometheus/cmd/prometheus@$(PROMETHEUS_VERSION)

tools: $(OCB) $(STATICCHECK) $(PROMTOOL) $(PROMETHEUS)

# cockpit regenerates the dashboards and rules in cockpit/ from its Go
# sources (a test fails while the committed files differ).
cockpit:
	$(GO) generate ./cockpit

# unit-test needs the built distribution: internal/testing/crashtest runs it as a
# child process and kills it with SIGKILL (it fails, never skips, without it);
# the cockpit's tests need promtool and prometheus.
unit-test: build $(PROMTOOL) $(PROMETHEUS)
	OTELCOL_OPENHANDS_BIN=$(BIN) PROMTOOL=$(PROMTOOL) PROMETHEUS=$(PROMETHEUS) $(GOTEST) ./...

# dist-test checks the packages, the image, the chart and that every
# place the release is named agrees (the distribution module, built from
# the binary). Without -race: nothing in it is concurrent, and the race
# detector makes compressing the binary many times slower.
dist-test: build
	cd distribution && OTELCOL_OPENHANDS_BIN=$(BIN) $(GO) test -count=1 ./...

# test builds the distribution, then runs every unit, scenario, end-to-end
# and crash test with the race detector, then the distribution's tests.
test: unit-test dist-test

# package writes the deb and rpm packages into dist/.
package: build
	$(DIST_CMD) package

# image writes the OCI image into dist/image (an OCI layout, tagged with
# the release), without a Docker daemon.
image: build
	$(DIST_CMD) image

# chart copies the cockpit's dashboards and rules into the chart, then
# writes its archive into dist/.
chart:
	$(DIST_CMD) chart

$(STATICCHECK):
	GOBIN=$(TOOLS_DIR) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: $(STATICCHECK)
	$(GO) vet ./...
	$(STATICCHECK) ./...
	cd distribution && $(GO) vet ./... && $(STATICCHECK) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# demo builds the distribution and plays one scripted conversation through
# it: simulated agent server -> collector -> local AEP relay, on loopback.
demo: build
	$(GO) run ./internal/testing/demo -collector $(BIN) -config testdata/demo-config.yaml

# demo-control is the demo with the control gate open: an operator approves
# a pending action, then pauses and resumes the run, through the relay.
demo-control: build
	$(GO) run ./internal/testing/demo -scenario control -collector $(BIN) -config testdata/demo-control-config.yaml

# demo-fleet is the demo with other agents beside OpenHands: Codex- and
# VS Code-shaped OTLP log exports (otlp receiver, aepinbound processor) and
# an AEP emitter's POST (aep receiver) into the same collector: one relay
# stream, one waterfall per session, one cost table with every agent's
# tokens and cost.
demo-fleet: build
	$(GO) run ./internal/testing/demo -scenario fleet -collector $(BIN) -config testdata/demo-fleet-config.yaml

# demo-govern is the demo with the aeppolicy processor: a run crosses its
# session's wall-time budget, a notice, then the hard breach, which pauses
# the conversation through the open gate; the operator resumes it.
demo-govern: build
	$(GO) run ./internal/testing/demo -scenario govern -collector $(BIN) -config testdata/demo-govern-config.yaml

venv:
	@.ci/agent-server-venv $(OH_VENV) $(OH_SERVER_VERSION)

# live-test runs the built collector, in every socket mode, against the real
# openhands-agent-server driven by a scripted fake LLM, then once more with
# the control gate open, driving every verb through a relay, then on a
# conversation tree (an agent starting a child conversation, and a fork),
# then with the aeppolicy processor pausing a looping conversation.
live-test: build venv
	$(LIVE_TEST)

# record regenerates testdata/recorded/ from a live run: what the agent
# server sent each receiver, and the AEP stream it emitted. make test
# replays them.
record: build venv
	LIVE_RECORD=$(CURDIR)/testdata/recorded $(LIVE_TEST)

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# bench-e2e measures the built collector out of process: the stub agent
# server, the test relay, the floor client and the plain OTLP pipeline run
# as processes beside it (internal/testing/benche2e). BENCH_E2E_FLAGS passes flags,
# e.g. BENCH_E2E_FLAGS="-soak -conversations 100".
bench-e2e: build
	$(GO) build -o bin/ ./internal/testing/benche2e ./internal/testing/openhandstest/cmd/ohstub ./internal/testing/aeprelaytest/cmd/aeprelay
	bin/benche2e -collector $(BIN) -stub bin/ohstub -relay bin/aeprelay $(BENCH_E2E_FLAGS)

clean:
	rm -rf bin build dist
