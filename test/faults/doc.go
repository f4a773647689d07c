//go:build faults

// Package faults is walrelay's fault-injection suite: the failpoints build of
// the binary (see package failpoint) under a load of concurrent writers,
// against real PostgreSQL and Kafka that the tests kill, pause, restart and
// cut off (test/faultproxy). Every test checks that no committed message is
// lost and no aggregate is out of order, and reports its duplicates with the
// fault that caused them.
//
// The suite stops and restarts the shared services, so it runs alone, one
// test at a time: `make faults` (part of `make test`) with the faults build
// tag. WALRELAY_CHAOS_SCALE (default 1) multiplies the number of faults, the
// load and the outage lengths for a longer soak: `make chaos`.
package faults
