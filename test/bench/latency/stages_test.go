//go:build bench

package latency

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stages splits the consumer's latency of the window's messages at the
// record timestamp walrelay's sink sets when it takes a message (after
// decoding, before batching): toSink is COMMIT return to that timestamp
// (walsender, network, decode), toConsumer the timestamp to arrival (batch
// linger, produce, Kafka's acknowledgement of all replicas, fetch). Both
// sorted; the timestamp has millisecond precision, and a message may reach
// walrelay before its COMMIT returns to the writer, so toSink can be
// slightly negative.
type stages struct {
	toSink, toConsumer []time.Duration
}

func splitStages(w *writer, c *consumer, from, to time.Duration) stages {
	var s stages
	for n := range w.total {
		committed := w.committed[n]
		if committed < from || committed >= to {
			continue
		}
		arrived, ok := c.arrival(n)
		published, ok2 := c.publishedAt(n)
		if !ok || !ok2 {
			continue
		}
		returned := w.base.Add(committed)
		s.toSink = append(s.toSink, published.Sub(returned))
		s.toConsumer = append(s.toConsumer, w.base.Add(arrived).Sub(published))
	}
	slices.Sort(s.toSink)
	slices.Sort(s.toConsumer)
	return s
}

// slowSeconds counts the seconds of the window (counted from its start)
// whose worst consumer latency exceeded limit, and names the worst three:
// whether slow messages cluster in bursts or spread evenly says much about
// their cause.
func slowSeconds(w *writer, c *consumer, from, to, limit time.Duration) string {
	type second struct {
		worst time.Duration
		over  int
	}
	secs := map[int]*second{}
	for n := range w.total {
		committed := w.committed[n]
		if committed < from || committed >= to {
			continue
		}
		at, ok := c.arrival(n)
		if !ok || at-committed <= limit {
			continue
		}
		k := int((committed - from) / time.Second)
		if secs[k] == nil {
			secs[k] = &second{}
		}
		secs[k].over++
		secs[k].worst = max(secs[k].worst, at-committed)
	}
	if len(secs) == 0 {
		return "none"
	}
	keys := make([]int, 0, len(secs))
	for k := range secs {
		keys = append(keys, k)
	}
	// The worst three, so that a long bad stretch does not flood the table.
	slices.SortFunc(keys, func(a, b int) int { return cmp.Compare(secs[b].worst, secs[a].worst) })
	var parts []string
	for _, k := range keys[:min(3, len(keys))] {
		parts = append(parts, fmt.Sprintf("s%d: %d msgs, worst %s", k, secs[k].over, ms(secs[k].worst)))
	}
	return fmt.Sprintf("%d of %d s; worst: %s", len(secs), int((to-from)/time.Second), strings.Join(parts, "; "))
}

// cpuTimes is the machine's aggregate line of /proc/stat, in ticks.
type cpuTimes struct{ busy, total uint64 }

func readCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	var c cpuTimes
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTimes{}
		}
		c.total += v
		if i != 3 && i != 4 { // idle and iowait
			c.busy += v
		}
	}
	return c
}

// busySince is the share of the machine's CPU time that was busy between
// an earlier reading and c (every process, not only this benchmark's).
func (c cpuTimes) busySince(earlier cpuTimes) float64 {
	if c.total <= earlier.total {
		return 0
	}
	return float64(c.busy-earlier.busy) / float64(c.total-earlier.total)
}
