# walrelay: two commands matter.
#   make demo   start PostgreSQL and Kafka locally, run walrelay, watch orders flow
#   make test   start the same services, run every test (unit and end-to-end) with -race
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
# The version `make build` stamps (scripts/build.sh): empty takes `git
# describe --tags --always --dirty`. BIN is where the binary goes.
VERSION ?=
BIN ?= bin/walrelay
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# fail a clean run with "context deadline exceeded" when a worker is busy as
# the time runs out (golang/go#75804, fixed in Go 1.27); a count has no
# deadline to race. 300,000 inputs take about 20 s on the 2-core CI machine.
FUZZTIME ?= 300000x
# The rig's PostgreSQL major version (scripts/pg.sh): the full suite runs on
# it, the compatibility set on each of PG_OTHERS.
export PG_MAJOR ?= 18
PG_OTHERS ?= $(filter-out $(PG_MAJOR),14 15 16 17 18)
# The end-to-end tests that exercise what differs between versions:
# streaming and the confirm rule, a restart, bad rows, check, status, prune,
# heartbeats, least privilege, an RDS-shaped role (the walsender refusal
# differs by version), the private servers, failover, and recover
# after a failover below 17 (its slot with an exported snapshot, whose
# grammar differs between 14 and 15+), and a partitioned outbox with
# partitions attached and detached while running. The lost-slot recovery runs on the
# default version only, to keep CI's time; both ways a lost slot is reported
# (wal_status, invalidation_reason) are covered by relay's unit tests.
COMPAT_TESTS ?= ^(TestEveryCommittedRowArrivesInOrder|TestSIGTERMMidStreamThenRestartLosesNothing|TestUndecodableRowsAreParkedAndDiscarded|TestCheckGoodRig|TestStatusReportsTheRunningRelay|TestPruneDeletesOnlyPublishedOldRows|TestHeartbeatKeepsTheSlotMovingWhileAnotherDatabaseWrites|TestLeastPrivilegeRoleSaysWhatIsMissing|TestCheckNamesTheRDSWayForAnRDSShapedRole|TestStandbyFollowsAndPromotes|TestFailover|TestRecoverAfterFailoverWithoutFailoverSlots|TestPartitionedOutboxWithPartitionsAttachedAndDetached)$$

# The Kafka compatibility set: the end-to-end tests that exercise what differs
# between Kafka versions (the protocol versions a broker accepts, which Kafka 4
# cut back, KIP-896; the admin calls `check` makes; TLS and SASL): streaming in
# order, a restart, records that carry their WAL position, bad rows parked,
# records Kafka refuses parked or halting the relay, check, resuming from
# Kafka's tail after a failover, and TLS and SASL on a broker the test starts
# from the same jars. It runs against KAFKA_COMPAT_VERSION, the newest 3.9
# release, on a broker of its own beside the rig's and with the rig's
# PostgreSQL (scripts/compat-kafka.sh); every test runs against the rig's Kafka
# 4.4.0 (scripts/kafka.sh).
KAFKA_COMPAT_VERSION ?= 3.9.2
KAFKA_COMPAT_TESTS ?= ^(TestEveryCommittedRowArrivesInOrder|TestSIGTERMMidStreamThenRestartLosesNothing|TestRecordsCarryTheirWALPosition|TestUndecodableRowsAreParkedAndDiscarded|TestRetryableBadMessagesAreParkedInOrderAndRetried|TestHaltStopsBeforeARefusedRecordUntilTheTopicIsFixed|TestCheckGoodRig|TestFailover|TestKafkaSecurity)$$

.PHONY: all build test unit faults chaos fuzz compat compat-kafka vet rig-up rig-down demo demo-shop demo-outage bench bench-recover clean

all: build

# The same build as the Dockerfile's: scripts/build.sh, the version stamped.
build:
	VERSION="$(VERSION)" GO="$(GO)" scripts/build.sh $(BIN)

vet:
	$(GO) vet ./...
	cd test && $(GO) vet ./... && $(GO) vet -tags faults ./faults && $(GO) vet -tags bench ./bench/...
	$(GO) vet -tags walrelay_discard ./cmd/walrelay
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
# `make rig-down` stops them): the stages of scripts/test.sh, those that can
# share the machine at once, then the stages' times and the ten slowest tests.
test: vet rig-up
	COMPAT_TESTS='$(COMPAT_TESTS)' PG_OTHERS='$(PG_OTHERS)' KAFKA_COMPAT_TESTS='$(KAFKA_COMPAT_TESTS)' \
	  KAFKA_COMPAT_VERSION='$(KAFKA_COMPAT_VERSION)' FUZZTIME='$(FUZZTIME)' GO='$(GO)' scripts/test.sh

# The fault-injection suite: it kills and restarts the services, so it runs
# on a rig of its own (scripts/faults.sh), which it starts and stops; the
# shared rig is not needed and not touched.
faults:
	GO='$(GO)' scripts/faults.sh

# A longer soak of the same suite: more faults, more load, longer outages.
CHAOS_SCALE ?= 5
chaos:
	WALRELAY_CHAOS_SCALE=$(CHAOS_SCALE) GO='$(GO)' scripts/faults.sh -timeout 180m

# The compatibility set on every other supported PostgreSQL, each version
# on a cluster of its own beside the rig's, COMPAT_JOBS (2) at a time,
# against the rig's Kafka (scripts/compat.sh).
compat: rig-up
	scripts/compat.sh '$(COMPAT_TESTS)' $(PG_OTHERS)

# The Kafka compatibility set on Kafka KAFKA_COMPAT_VERSION, on a broker of
# its own (127.0.0.1:29200-29203) that it starts, then stops and purges,
# with the rig's PostgreSQL (scripts/compat-kafka.sh; part of make test).
compat-kafka: rig-up
	GO='$(GO)' scripts/compat-kafka.sh '$(KAFKA_COMPAT_TESTS)' $(KAFKA_COMPAT_VERSION)

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./decoder

# DEMO=shop runs the example services instead (examples/): orders over HTTP,
# warehouse and notifier consumers through their inboxes, a local SMTP sink.
demo: build rig-up
	if [ "$${DEMO:-}" = shop ]; then scripts/demo-shop.sh; else scripts/demo.sh; fi

demo-shop: rig-up
	scripts/demo-shop.sh

# The demo with Kafka stopped for a minute, watched by Prometheus with the
# shipped rules; prints the shipped dashboard's queries before, during and
# after the outage.
demo-outage: build rig-up
	scripts/demo-outage.sh

# The benchmark suite (issue 7): drain rate against pg_recvlogical, latency at
# steady load, allocations per message; prints the tables and rewrites the
# generated part of BENCHMARKS.md. WALRELAY_BENCH_SCALE=0.1 for a quick look.
bench: rig-up
	scripts/bench.sh

# The recover benchmark alone (issue 17): a 100,000-row gap closed by
# walrelay recover against the same rows streamed by walrelay run; prints
# the table and writes .rig/bench/recover.md (BENCHMARKS.md is left alone).
# WALRELAY_BENCH_SCALE=0.1 for a quick look.
bench-recover: rig-up
	eval "$$(scripts/rig.sh env)"; cd test && $(GO) test -tags bench -count=1 -timeout 30m -v -run TestBenchRecover ./bench/recover

clean:
	rm -rf bin
