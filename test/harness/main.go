// Package harness runs walrelay as users run it, for the end-to-end and
// fault-injection tests: the real binary against a real PostgreSQL and a
// real Kafka broker (scripts/rig.sh starts them; make test does that), a
// load of concurrent writers, and a verifier that reads every topic back
// with kcat, a client that shares no code with walrelay's sink.
//
// It is built on internal/testkit, which the root module's tests use too:
// testkit (Services, Must, FreePort, a CA), rig (the rig's variables and
// scripts), poll (waiting for a condition), kafkatest (topics, offsets, kcat
// reads) and pgtest (a test's own objects in PostgreSQL). Its files go by
// concern: fixture (the outbox and its walrelay commands), relay (a running
// `walrelay run`), mark (Kafka end offsets at a fault), load, verify,
// metrics, process, role.
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
	Binary, err = Build(dir, "github.com/walrelay/walrelay/cmd/walrelay", tags...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 1
	}
	return m.Run()
}

// Build compiles the main package pkg with -race (and the given build tags)
// into dir and returns the executable's path: Main builds walrelay with it,
// the pattern tests the example services.
func Build(dir, pkg string, tags ...string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-race", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	build := exec.Command("go", append(args, pkg)...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	return out, nil
}
