# walrelay: two commands matter.
#   make demo   start PostgreSQL and Kafka locally, run walrelay, watch orders flow
#   make test   start the same services, run every test (unit and end-to-end) with -race
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
FUZZTIME ?= 20s

.PHONY: all build test unit e2e fuzz vet rig-up rig-down demo clean

all: build

build:
	$(GO) build -o bin/walrelay ./cmd/walrelay

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.rig/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

rig-up:
	scripts/rig.sh start

rig-down:
	scripts/rig.sh stop

# Unit tests only: no services needed; end-to-end tests skip under -short.
unit:
	$(GO) test -short -race -count=1 ./...

# Everything, against the real services (started if needed, left running;
# `make rig-down` stops them).
test: vet rig-up
	eval "$$(scripts/rig.sh env)"; $(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) fuzz

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./decoder

demo: build rig-up
	scripts/demo.sh

clean:
	rm -rf bin
