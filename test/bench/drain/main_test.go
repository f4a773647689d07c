//go:build bench

package drain

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/walrelay/walrelay/test/harness"
)

// The two walrelay binaries under test. Both are plain builds: -race (as
// harness.Build makes them) would measure the race detector.
var (
	walrelayBin string // as shipped
	discardBin  string // -tags walrelay_discard
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "walrelay-drain-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "drain:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if walrelayBin, err = build(dir, "walrelay"); err == nil {
		discardBin, err = build(dir, "walrelay-discard", "-tags", "walrelay_discard")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "drain:", err)
		return 1
	}
	return m.Run()
}

// build compiles cmd/walrelay of this checkout into dir/name.
func build(dir, name string, flags ...string) (string, error) {
	out := filepath.Join(dir, name)
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.Command("go", append(args, "./cmd/walrelay")...)
	cmd.Dir = harness.RepoRoot()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	return out, nil
}
