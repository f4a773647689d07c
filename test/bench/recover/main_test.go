//go:build bench

package recover

import (
	"fmt"
	"os"
	"testing"

	"github.com/walrelay/walrelay/test/bench/benchenv"
	"github.com/walrelay/walrelay/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run builds walrelay without -race (harness.Main's build would measure
// the race detector) and makes it the harness's binary, so that fixtures
// and their commands run the build under test.
func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "walrelay-recover-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "recover bench:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if harness.Binary, err = benchenv.Build(dir, "walrelay", ""); err != nil {
		fmt.Fprintln(os.Stderr, "recover bench:", err)
		return 1
	}
	return m.Run()
}
