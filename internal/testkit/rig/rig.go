// Package rig is what tests know of the test rig (scripts/rig.sh): the
// services' addresses it exports as WALRELAY_TEST_* variables, its scripts,
// and names unique to one test.
//
// A test that needs a service it was not given fails, so that a CI run
// without services cannot pass by skipping; under -short it skips.
//
// Internal: for walrelay's tests only.
package rig

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Env returns a variable of the rig, or ends the test: a skip under
// -short, a failure otherwise.
func Env(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if testing.Short() {
			t.Skipf("needs %s (make test sets it)", name)
		}
		t.Fatalf("%s is not set: run `make test`, or `eval \"$(scripts/rig.sh env)\"` after `scripts/rig.sh start`", name)
	}
	return v
}

// PGURL is the rig's PostgreSQL superuser URL (WALRELAY_TEST_PG_URL).
func PGURL(t testing.TB) string {
	t.Helper()
	return Env(t, "WALRELAY_TEST_PG_URL")
}

// KafkaBrokers is the rig's Kafka bootstrap list, comma-separated
// (WALRELAY_TEST_KAFKA_BROKERS).
func KafkaBrokers(t testing.TB) string {
	t.Helper()
	return Env(t, "WALRELAY_TEST_KAFKA_BROKERS")
}

// Unique is prefix followed by 16 random hex digits: a name no other test
// running at once in the same database or broker uses.
func Unique(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return prefix + hex.EncodeToString(b[:])
}

// RepoRoot is the top of the walrelay checkout.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Script runs one of the rig's scripts (scripts/pg.sh restart fast, say)
// and fails the test when it fails; it returns the script's output.
func Script(t testing.TB, script string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(RepoRoot(), "scripts", script), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("scripts/%s %s: %v\n%s", script, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// KafkaPid is the rig broker's process id.
func KafkaPid(t testing.TB) int {
	t.Helper()
	out := strings.TrimSpace(Script(t, "kafka.sh", "pid"))
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("kafka pid: got %q; want a number", out)
	}
	return pid
}
