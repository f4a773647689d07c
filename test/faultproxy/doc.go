// Package faultproxy is a loopback TCP proxy that end-to-end tests put
// between walrelay and a service (PostgreSQL's replication link, Kafka) to
// break the link on purpose.
//
// A Proxy forwards every connection it accepts to one target address and
// has three states, switched at any time by the test:
//
//   - normal (after Start and Restore): bytes flow both ways.
//   - cut (Cut): every open connection is closed on both sides at once,
//     with a TCP reset where the platform allows, and new connections are
//     accepted and closed straight away. This is a broken link.
//   - stalled (Stall): connections stay open but no byte moves in either
//     direction; new connections are accepted but not dialed to the target.
//     Bytes sent meanwhile are held (one read buffer per direction in the
//     proxy, the rest in the kernel's socket buffers, so TCP flow control
//     pushes back on the sender) and delivered in order on Restore. This is
//     a slow network, not a lossy one.
//
// A Kafka client connects to the address the broker advertises, so a proxy
// in front of the broker's ordinary listener only sees the first metadata
// call. The test rig (scripts/kafka.sh) therefore gives the broker a second
// listener, PROXIED, that is advertised at the proxy's address: a test runs
// Start(WALRELAY_TEST_KAFKA_PROXY, WALRELAY_TEST_KAFKA_PROXIED) and points
// its client at the proxy.
//
// Start starts the accept loop at once (this is a test fixture, not a
// component of walrelay, so it does not follow the Run(ctx) shape); Close
// stops it and returns only after every goroutine of the Proxy has ended.
package faultproxy
