// Package e2e tests walrelay as users run it: the real binary against a
// real PostgreSQL and a real Kafka broker, through test/harness. The fault
// injection suite is in test/faults.
//
// A test that has everything to itself (its fixture's table, slot,
// publication and topics, or servers of its own) and judges no timing that
// other tests' load could move calls t.Parallel: they run together after
// the others, up to go test's -parallel (make test gives 4). The rest run
// one at a time: those that share a role or a server setting (the TLS
// role, pg_hba), watch the whole server's WAL (prune's wait, the idle and
// stall watchdogs, heartbeats), start Kafka brokers, or count what the
// server has in use.
package e2e
