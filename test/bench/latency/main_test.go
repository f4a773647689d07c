//go:build bench

package latency

import (
	"fmt"
	"os"
	"testing"

	"github.com/walrelay/walrelay/test/bench/benchenv"
	"github.com/walrelay/walrelay/test/harness"
)

// TestMain builds walrelay without -race (harness.Main would build with it,
// and a race build is several times slower: not what users run). The
// build tags in WALRELAY_BENCH_BUILD_TAGS are passed on, for profiling
// builds: walrelay_profile writes a CPU profile of each walrelay process
// to $WALRELAY_CPUPROFILE (cmd/walrelay/profile.go; every process of a run
// writes the same file, the last one to exit wins: profile one rate at a
// time).
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// baselineEnv names a git revision whose walrelay TestBenchSteady measures
// beside this tree's, rate by rate in the same run (before/after);
// baselineBin is that build.
const baselineEnv = "WALRELAY_BENCH_BASELINE"

var baselineBin string

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "walrelay-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := benchenv.Build(dir, "walrelay", os.Getenv("WALRELAY_BENCH_BUILD_TAGS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		return 1
	}
	harness.Binary = bin
	if rev := os.Getenv(baselineEnv); rev != "" {
		if baselineBin, err = benchenv.BuildAt(dir, "walrelay-baseline", rev); err != nil {
			fmt.Fprintln(os.Stderr, "latency:", err)
			return 1
		}
	}
	return m.Run()
}
