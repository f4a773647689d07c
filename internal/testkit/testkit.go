// Package testkit is what walrelay's own tests share: the rig's services
// for a test (Services), a free loopback port, a one-line error check and a
// certificate authority made for one test. It is internal: applications
// have no use for it. Its subpackages are the smaller pieces the unit and
// end-to-end tests use alone: rig (the rig's variables and scripts), poll
// (waiting for a condition), kafkatest (topics, offsets, kcat reads),
// pgtest (a test's own objects in PostgreSQL) and pgoutputtest (pgoutput
// messages built by hand). The end-to-end harness that runs the walrelay
// binary is test/harness, in the test module.
package testkit

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
)

// Services returns the rig's addresses, or ends the test: a skip under
// -short, a failure otherwise (CI must never pass by skipping).
func Services(t *testing.T) (pgURL, brokers string) {
	t.Helper()
	pgURL, brokers = os.Getenv("WALRELAY_TEST_PG_URL"), os.Getenv("WALRELAY_TEST_KAFKA_BROKERS")
	if pgURL != "" && brokers != "" {
		return pgURL, brokers
	}
	if testing.Short() {
		t.Skip("end-to-end test: needs WALRELAY_TEST_PG_URL and WALRELAY_TEST_KAFKA_BROKERS (make test starts the services)")
	}
	t.Fatal("WALRELAY_TEST_PG_URL and WALRELAY_TEST_KAFKA_BROKERS are not set: run `make test`, or `eval \"$(scripts/rig.sh env)\"` after `scripts/rig.sh start`")
	return "", ""
}

// FreePort returns a loopback address nobody listens on right now.
func FreePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// Must ends the test when err is not nil, saying what failed.
func Must(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}
