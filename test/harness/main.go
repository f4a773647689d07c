// Package harness runs walrelay as users run it, for the end-to-end and
// fault-injection tests: the real binary against a real PostgreSQL and a
// real Kafka broker (scripts/rig.sh starts them; make test does that), a
// load of concurrent writers, and a verifier that reads every topic back
// with kcat, a client that shares no code with walrelay's sink.
//
// Without WALRELAY_TEST_PG_URL and WALRELAY_TEST_KAFKA_BROKERS the tests
// fail, so that a CI run without services cannot pass by skipping; with
// -short they skip.
package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Binary is the walrelay executable under test, built by Main with -race.
var Binary string

// Main builds walrelay (with the given build tags) and runs the tests:
// call it from TestMain.
func Main(m *testing.M, tags ...string) int {
	dir, err := os.MkdirTemp("", "walrelay-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	Binary = filepath.Join(dir, "walrelay")
	args := []string{"build", "-race", "-o", Binary}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	build := exec.Command("go", append(args, "github.com/walrelay/walrelay/cmd/walrelay")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "harness: build walrelay:", err)
		return 1
	}
	return m.Run()
}

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
