// Package e2e tests walrelay as users run it: the real binary against a
// real PostgreSQL and a real Kafka broker, started by scripts/rig.sh (make
// test does that). What landed in Kafka is read back with kcat, a client
// that shares no code with walrelay's sink.
//
// Without WALRELAY_TEST_PG_URL and WALRELAY_TEST_KAFKA_BROKERS the tests
// fail, so that a CI run without services cannot pass by skipping; with
// -short they skip.
package e2e
