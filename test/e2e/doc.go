// Package e2e tests walrelay as users run it: the real binary against a
// real PostgreSQL and a real Kafka broker, through test/harness. The fault
// injection suite is in test/faults.
package e2e
