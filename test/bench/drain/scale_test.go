//go:build bench

package drain

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// The scale curves (issue 20): how the drain rate and walrelay's CPU per
// message move with the payload and with the topic's partitions, so that a
// user can size a deployment from them.
var (
	scalePayloads   = []int{64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10}
	scalePartitions = []int{1, 3, 12, 48}
)

const (
	// scaleRows is a curve point's backlog at scale 1, in single-row
	// transactions (the common outbox write)...
	scaleRows = 100_000
	// ...cut so that its payload stays under scalePayloadBytes, which keeps
	// the 64 KB point to a few seconds.
	scalePayloadBytes = 400e6
	// scalePartitionPayload is the payload of the partition curve.
	scalePartitionPayload = 1 << 10
)

// point is one point of a curve: a backlog drained by pg_recvlogical (the
// reference) and by walrelay to a topic of parts partitions.
type point struct {
	payload, parts int
	rows           int64
	payloadBytes   int64
	recv, kafka    measure
}

func TestBenchScale(t *testing.T) {
	pgURL, brokers, scale, loadBefore := setUp(t)
	rowsFor := func(payload int) int {
		return max(1000, int(float64(min(scaleRows, int(scalePayloadBytes)/payload))*scale))
	}
	var byPayload, byParts []point
	for _, p := range scalePayloads {
		t.Run("payload/"+payloadName(p), func(t *testing.T) {
			byPayload = append(byPayload, drainPoints(t, pgURL, brokers, rowsFor(p), p, []int{partitions})...)
		})
	}
	t.Run(fmt.Sprintf("partitions/%s", payloadName(scalePartitionPayload)), func(t *testing.T) {
		byParts = drainPoints(t, pgURL, brokers, rowsFor(scalePartitionPayload), scalePartitionPayload, scalePartitions)
	})
	if len(byPayload) == 0 && len(byParts) == 0 {
		return
	}
	md := scaleReport(t, pgURL, brokers, scale, byPayload, byParts, loadBefore+" before, "+benchenv.LoadAverage()+" after")
	t.Log("\n" + md)
	benchenv.WriteReport(t, "scale.md", md)
}

// drainPoints loads rows single-row transactions of payload and drains them
// once with pg_recvlogical, then once with walrelay to a topic of each
// partition count, each on a slot of its own: one point per count.
func drainPoints(t *testing.T, pgURL, brokers string, rows, payload int, parts []int) []point {
	ctx := context.Background()
	b := newBacklog(ctx, t, pgURL, brokers, 1+len(parts))
	b.fill(ctx, t, shape{txns: rows, perTxn: 1}, payload)
	settle(t)
	within := 5*time.Minute + time.Duration(rows)*5*time.Millisecond
	recv := runRecvlogical(ctx, t, b, b.slots[0], within)
	t.Logf("%d rows of %s: pg_recvlogical %.2fs", rows, payloadName(payload), recv.wall.Seconds())
	var out []point
	for i, n := range parts {
		m, _ := runToKafka(ctx, t, b, walrelayBin, b.slots[1+i], fmt.Sprintf("scale_%s_%d", b.id, n), n, within)
		t.Logf("%d partition(s): walrelay %.2fs, cpu %.2fs, rss %d MiB, broker cpu %.2fs (JIT %.2fs)",
			n, m.wall.Seconds(), m.cpu.Seconds(), m.maxRSS>>20, m.broker.Seconds(), m.brokerJIT.Seconds())
		out = append(out, point{payload: payload, parts: n, rows: b.rows, payloadBytes: b.payloadBytes, recv: recv, kafka: m})
	}
	return out
}

func scaleReport(t *testing.T, pgURL, brokers string, scale float64, byPayload, byParts []point, load string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Scale: drain rate and CPU against payload and partitions (issue 20)\n\n")
	fmt.Fprintf(&b, "Reproduce: `cd test && WALRELAY_BENCH_SCALE=%g go test -tags bench -run TestBenchScale -count=1 -timeout 0 -v ./bench/drain`\n\n", scale)
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), PostgreSQL %s, Kafka %s (broker at %s), %s. Load average (1, 5, 15 min): %s.\n\n",
		runtime.NumCPU(), benchenv.CPUModel(), benchenv.PGVersion(t, pgURL), benchenv.KafkaVersion(), brokers,
		time.Now().UTC().Format("2006-01-02 15:04 MST"), load)
	if f := relayFlags(); len(f) > 0 {
		fmt.Fprintf(&b, "walrelay ran with the extra flags `%s` (WALRELAY_BENCH_RELAY_FLAGS).\n\n", strings.Join(f, " "))
	}
	header := "| payload | partitions | rows | walrelay msg/s | walrelay MB/s | pg_recvlogical msg/s | ratio " +
		"| walrelay µs/msg | walsender µs/msg | broker µs/msg (JIT) | walrelay peak RSS MiB |\n|" + strings.Repeat("---|", 11) + "\n"
	row := func(p point) {
		us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(p.rows) }
		rate := func(m measure) float64 { return float64(p.rows) / m.wall.Seconds() }
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.1f | %.0f | %.2f | %.1f | %.1f | %.1f (%.1f) | %d |\n",
			payloadName(p.payload), p.parts, p.rows, rate(p.kafka), float64(p.payloadBytes)/1e6/p.kafka.wall.Seconds(),
			rate(p.recv), rate(p.kafka)/rate(p.recv), us(p.kafka.cpu), us(p.kafka.walsender), us(p.kafka.broker), us(p.kafka.brokerJIT),
			p.kafka.maxRSS>>20)
	}
	if len(byPayload) > 0 {
		b.WriteString("Against the payload (single-row transactions, a topic of 3 partitions):\n\n" + header)
		for _, p := range byPayload {
			row(p)
		}
		b.WriteString("\n")
	}
	if len(byParts) > 0 {
		b.WriteString("Against the topic's partitions (the same backlog for every count):\n\n" + header)
		for _, p := range byParts {
			row(p)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, `- Each curve point drains its own backlog of single-row transactions (%d, fewer where that is more than
  %.0f MB of payload, at least 1,000; 1,000 aggregate ids), once, through a slot of its own: pg_recvlogical first
  (pgoutput to /dev/null, the decode limit), then walrelay as shipped to a topic of that many partitions
  (acks=all, checked to hold a record per row). One run per point: read the curve's shape, not one point's
  second digit.
- msg/s and MB/s: rows and payload bytes (MB = 10^6 B) over the wall time, from process start until the slot
  confirmed the end (walrelay, with --confirm-interval 20ms) or the process exited at it (pg_recvlogical); ratio = walrelay's over pg_recvlogical's.
- µs/msg: CPU time over rows, of walrelay, of the walsender that decoded for it, and of the Kafka broker during
  the run (of it, the JVM's compiler threads': see the drain table's notes). On this machine all three share
  the same %d cores: where their sum over the cores is near the wall time, the machine is the limit.
`, int(float64(scaleRows)*scale), scalePayloadBytes*scale/1e6, runtime.NumCPU())
	return b.String()
}
