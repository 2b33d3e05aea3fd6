# Everything a newcomer needs, with nothing pre-installed beyond Go.
GO          ?= go
OCB_VERSION := v0.165.0
TOOLS_DIR   := $(CURDIR)/.tools
OCB         := $(TOOLS_DIR)/builder
STATICCHECK := $(TOOLS_DIR)/staticcheck
DIST_DIR    := $(CURDIR)/build/otelcol-openhands
BIN         := $(CURDIR)/bin/otelcol-openhands
GOTEST      := $(GO) test -race -count=1

.PHONY: all build test unit-test lint bench demo clean

all: lint test

$(OCB):
	GOBIN=$(TOOLS_DIR) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(OCB_VERSION)

# build generates the distribution's sources with ocb, then compiles them.
build: $(OCB)
	mkdir -p $(DIST_DIR)
	$(OCB) --config=builder-config.yaml --skip-compilation
	cd $(DIST_DIR) && $(GO) build -trimpath -o $(BIN) .

# unit-test needs the built distribution: internal/crashtest runs it as a
# child process and kills it with SIGKILL (it fails, never skips, without it).
unit-test: build
	OTELCOL_OPENHANDS_BIN=$(BIN) $(GOTEST) ./...

# test builds the distribution, then runs every unit, scenario, end-to-end
# and crash test with the race detector.
test: unit-test

$(STATICCHECK):
	GOBIN=$(TOOLS_DIR) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: $(STATICCHECK)
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# demo builds the distribution and plays one scripted conversation through
# it: simulated agent server -> collector -> local AEP relay, on loopback.
demo: build
	$(GO) run ./internal/demo -collector $(BIN) -config testdata/demo-config.yaml

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

clean:
	rm -rf bin build
