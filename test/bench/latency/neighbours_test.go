//go:build bench

package latency

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// neighbours watches for other busy programs on the machine while the
// window runs: other test binaries, other walrelay processes,
// pg_recvlogical, the Go compiler and linker, PostgreSQL's autovacuum
// workers. The machine has two cores shared by everyone, so a
// figure measured beside another benchmark says more about the neighbour
// than about walrelay; the report names them rather than guessing.
type neighbours struct {
	own  map[int]bool // this test and its walrelay
	mu   sync.Mutex
	seen map[string]bool
	stop chan struct{}
	done chan struct{}
}

func watchNeighbours(ownPIDs ...int) *neighbours {
	n := &neighbours{own: map[int]bool{}, seen: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, p := range ownPIDs {
		n.own[p] = true
	}
	go func() {
		defer close(n.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			n.sample()
			select {
			case <-n.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return n
}

func (n *neighbours) sample() {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil || n.own[pid] {
			continue
		}
		b, err := os.ReadFile(d)
		if err != nil {
			continue // gone meanwhile
		}
		if name := busyName(d, strings.TrimSpace(string(b))); name != "" {
			n.mu.Lock()
			n.seen[name] = true
			n.mu.Unlock()
		}
	}
}

// busyName is how the report names a process of command comm (its
// /proc/<pid>/comm at path) if it is one to watch, else "".
func busyName(path, comm string) string {
	switch {
	case strings.HasSuffix(comm, ".test"), comm == "walrelay", comm == "pg_recvlogical", comm == "compile", comm == "link":
		return comm
	case comm == "postgres":
		// A backend's title is in its command line: "postgres: autovacuum worker db".
		b, err := os.ReadFile(filepath.Join(filepath.Dir(path), "cmdline"))
		if err == nil && strings.Contains(string(b), "autovacuum worker") {
			return "autovacuum"
		}
	}
	return ""
}

// end stops watching and returns what was seen, or "none".
func (n *neighbours) end() string {
	close(n.stop)
	<-n.done
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.seen) == 0 {
		return "none"
	}
	var names []string
	for s := range n.seen {
		names = append(names, s)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
