//go:build faults

// Package faults is walrelay's fault-injection suite: the failpoints build of
// the binary (see package failpoint) under a load of concurrent writers,
// against real PostgreSQL and Kafka that the tests kill, pause, restart and
// cut off (test/faultproxy). Every test checks that no committed message is
// lost and no aggregate is out of order, and reports its duplicates with the
// fault that caused them.
//
// scripts/faults.sh gives the suite services of its own: a PostgreSQL, a
// PgBouncer and a single Kafka broker, and a three-broker Kafka cluster with
// separate controllers (scripts/kafka-cluster.sh) for the faults only a
// cluster has (cluster_test.go: a leader killed, a rolling restart, brokers
// below min.insync.replicas, the controller killed, a reassignment, a
// broker cut off).
//
// The suite stops and restarts those services, so the tests that do run
// alone, one test at a time: `make faults` (part of `make test`) with the faults build
// tag. WALRELAY_CHAOS_SCALE (default 1) multiplies the number of faults, the
// load and the outage lengths for a longer soak: `make chaos`.
package faults
