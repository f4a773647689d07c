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

// neighbours watches for other benchmark-like programs on the machine
// while the window runs: other test binaries, other walrelay processes,
// pg_recvlogical. The machine has two cores shared by everyone, so a
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
		comm := strings.TrimSpace(string(b))
		if strings.HasSuffix(comm, ".test") || comm == "walrelay" || comm == "pg_recvlogical" {
			n.mu.Lock()
			n.seen[comm] = true
			n.mu.Unlock()
		}
	}
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
