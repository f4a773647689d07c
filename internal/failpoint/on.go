//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

var (
	armed string           // the point named in WALRELAY_FAILPOINT
	at    int64        = 1 // the hit that kills
	hits  atomic.Int64     // hits of the armed point so far
)

func init() {
	spec := os.Getenv("WALRELAY_FAILPOINT")
	name, n, found := strings.Cut(spec, "@")
	armed = name
	if found {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "walrelay: WALRELAY_FAILPOINT=%q: the count after @ must be a positive whole number\n", spec)
			os.Exit(2)
		}
		at = v
	}
}

// Inject kills the process with SIGKILL when name is the armed failpoint
// and this is the hit it was armed for.
func Inject(name string) {
	if name != armed || hits.Add(1) != at {
		return
	}
	fmt.Fprintf(os.Stderr, "failpoint %s@%d: killing walrelay\n", name, at)
	syscall.Kill(os.Getpid(), syscall.SIGKILL) //nolint:errcheck // the process is gone either way
	select {}                                  // never return into the code under test
}
