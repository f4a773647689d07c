//go:build bench

package latency

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/walrelay/walrelay/test/harness"
)

// TestMain builds walrelay without -race (harness.Main would build with it,
// and a race build is several times slower: not what users run). The
// build tags in WALRELAY_BENCH_BUILD_TAGS are passed on, for profiling
// builds.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "walrelay-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "walrelay")
	args := []string{"build", "-o", bin}
	if tags := os.Getenv("WALRELAY_BENCH_BUILD_TAGS"); tags != "" {
		args = append(args, "-tags", tags)
	}
	build := exec.Command("go", append(args, "github.com/walrelay/walrelay/cmd/walrelay")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "latency: build walrelay:", err)
		return 1
	}
	harness.Binary = bin
	return m.Run()
}
