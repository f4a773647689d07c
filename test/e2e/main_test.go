package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the walrelay executable under test, built once with -race.
var binary string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "walrelay-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "walrelay")
	build := exec.Command("go", "build", "-race", "-o", binary, "github.com/walrelay/walrelay/cmd/walrelay")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build walrelay:", err)
		return 1
	}
	return m.Run()
}

// services returns the rig's addresses, or ends the test: a skip under
// -short, a failure otherwise (CI must never pass by skipping).
func services(t *testing.T) (pgURL, brokers string) {
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
