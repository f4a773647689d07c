//go:build bench

package drain

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// report is drain.md: how to reproduce it, the machine, the table, and how
// to read it.
// load is the machine's load average around the runs: the machine is
// shared, and a busy one slows every run (the ratios less than the rates).
func report(t *testing.T, pgURL, brokers string, scale float64, results []result, load string) string {
	var b strings.Builder
	header(&b, t, "Drain: a backlog against pg_recvlogical", fmt.Sprintf(
		"cd test && WALRELAY_BENCH_SCALE=%g go test -tags bench -run TestBenchDrain -count=1 -timeout 0 -v ./bench/drain", scale),
		pgURL, brokers, load)
	plainTable(&b, results)
	b.WriteString("\n")
	table(&b, results)
	b.WriteString("\n")
	cpuTable(&b, results)
	b.WriteString(`
- The first table (issue 37) reads the rounds: kafka / recv is walrelay's msg/s to Kafka over pg_recvlogical's
  (the faster of its two runs of the round), the median round's and the lowest and highest round's; recv wall s
  is the spread of every pg_recvlogical run, which is the baseline's own noise (the walsender's mode, issue 21).
  The walsender floor is the least CPU per message any walsender spent decoding this WAL for any reader in any
  round (its reader named): walrelay's walsender at that floor and walrelay's own CPU per message (median round,
  then the spread) say what bounds its drain once the ratio stops moving.
- rows: WALRELAY_BENCH_SCALE times the issue's shape; * = cut so that the shape's WAL stays under ~3 GB.
  Payload: JSON around random base64 text (TOAST cannot compress it), 1000 aggregate ids.
- Each run drains the same WAL through its own slot, all created before the load; a round runs, in this order:
  pg_recvlogical (pgoutput, proto_version 1, to /dev/null, --endpos); goreader (see below); discard = walrelay built with
  -tags walrelay_discard (decodes and confirms, produces nothing); kafka = walrelay as shipped, to a topic of 3
  partitions, acks=all (RequireAll is fixed in the sink; there is no flag), then checked to hold one record per row;
  the baseline walrelay to Kafka, if asked for; pg_recvlogical again. recv is the faster of the two pg_recvlogical runs (both times in the last column):
  the first run reads the WAL from disk, the others may find it cached. A backlog of less than 500 MB of
  payload is drained in 3 rounds, each through slots of its own (WALRELAY_BENCH_ROUNDS overrides), and each run
  shows its median round: those runs last seconds, where the machine's noise weighs most.
- msg/s and MB/s: rows and payload bytes (as written, MB = 10^6 B) over the wall time from process start until
  done: pg_recvlogical's exit at the end position; walrelay's confirmed_flush_lsn at or past it (polled every
  20 ms; walrelay runs with --confirm-interval 20ms, so that its end is seen within 20 ms too: with the default
  250 ms the end of a drain was rounded up to the next confirmation, up to a quarter of a second), before the
  SIGTERM. ratio = the run's msg/s over recv's on the same WAL. walrelay's wall time includes its start-up
  (preflight, leader lock: about 0.1 s).
- CPU s: the process's user + system time (rusage); RSS: its peak resident set (VmHWM, sampled every 20 ms
  and at the end; rusage's maxrss cannot be used, see run_test.go).
  walsender CPU s: the server process that decoded for the run (/proc): the decoding is PostgreSQL's, the same
  work in every run. Kafka broker CPU s: the broker's CPU time during the kafka run; on this machine the broker,
  the walsender and walrelay share the two cores, which pg_recvlogical's run does not have to. (JIT): of it, the
  JVM's compiler threads'. Before the first shape the broker is warmed up (records of every payload size through
  kafka-go, as the sink sends them) until compiling takes under a tenth of its CPU: a young broker spends most of
  its CPU compiling, and the first shapes would pay for what the later ones are spared. After each load the
  machine settles before the runs: dirty pages written (sync) and the broker idle, its previous topics deleted.
- CPU per message (the second table): each process's CPU time over the rows. walsender: the server process
  that decoded for recv (pg_recvlogical), go (test/bench/goreader, a minimal pgoutput client: pgproto3's frontend,
  no decoding), discard and kafka; the lowest of recv and go is the reference (issue 21: walrelay's <= 1.05x of it).
  walrelay: the relay process itself; broker: the Kafka broker during the kafka run. bound: the run's
  walsender + walrelay (+ broker, for kafka) CPU over the machine's CPUs, or the largest of them if more: on a
  machine they share, no drain can be faster. A ratio r to pg_recvlogical is within reach only while bound <=
  recv's wall time / r, less walrelay's start-up. baseline (with WALRELAY_BENCH_BASELINE=<git rev>): walrelay built at that
  revision, to Kafka, in the same rounds; time ratio = kafka's wall time over the baseline's (issue 21: <= 0.6).
- Targets (issue 7, for payloads up to 1 KB): kafka >= 0.9 and discard >= 0.95 of pg_recvlogical;
  peak RSS < 100 MB on the 1M-row transaction.
`)
	return b.String()
}

// header is a report's title, how to reproduce it (a shell command), the
// machine, its load average around the runs (load) and the extra flags
// walrelay ran with, if any.
func header(b *strings.Builder, t *testing.T, title, reproduce, pgURL, brokers, load string) {
	fmt.Fprintf(b, "## %s\n\n", title)
	fmt.Fprintf(b, "Reproduce: `%s`\n\n", reproduce)
	fmt.Fprintf(b, "Machine: %d CPUs (%s), PostgreSQL %s, Kafka %s (broker at %s), %s.\n\n",
		runtime.NumCPU(), benchenv.CPUModel(), benchenv.PGVersion(t, pgURL), benchenv.KafkaVersion(), brokers, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(b, "Load average (1, 5, 15 min): %s; PostgreSQL, Kafka and walrelay share these CPUs with whatever else runs.\n\n", load)
	if f := relayFlags(); len(f) > 0 {
		fmt.Fprintf(b, "walrelay ran with the extra flags `%s` (WALRELAY_BENCH_RELAY_FLAGS).\n\n", strings.Join(f, " "))
	}
}

func table(b *strings.Builder, results []result) {
	b.WriteString("| shape | payload | rows | WAL MB | recv msg/s | recv MB/s | discard msg/s | discard ratio " +
		"| kafka msg/s | kafka ratio | CPU s recv / discard / kafka | peak RSS MiB discard / kafka " +
		"| walsender CPU s recv / discard / kafka | Kafka broker CPU s (JIT) | recv s 1st / 2nd |\n")
	b.WriteString("|" + strings.Repeat("---|", 15) + "\n")
	for _, r := range results {
		rows := fmt.Sprint(r.shape.rows())
		if r.capped {
			rows += "*"
		}
		if r.rounds > 1 {
			rows += fmt.Sprintf(" (%d rounds)", r.rounds)
		}
		base := r.baseline()
		d, k := r.runs[runDiscard], r.runs[runKafka]
		fmt.Fprintf(b, "| %s | %s | %s | %.0f | %.0f | %.1f | %.0f | %.2f | %.0f | %.2f | %.2f / %.2f / %.2f | %d / %d | %.2f / %.2f / %.2f | %.2f (%.2f) | %.2f / %.2f |\n",
			r.shape.name, payloadName(r.payload), rows, float64(r.walBytes)/1e6,
			r.rate(base), float64(r.payloadBytes)/1e6/base.wall.Seconds(),
			r.rate(d), r.rate(d)/r.rate(base), r.rate(k), r.rate(k)/r.rate(base),
			base.cpu.Seconds(), d.cpu.Seconds(), k.cpu.Seconds(), d.maxRSS>>20, k.maxRSS>>20,
			base.walsender.Seconds(), d.walsender.Seconds(), k.walsender.Seconds(), k.broker.Seconds(), k.brokerJIT.Seconds(),
			r.runs[runRecv].wall.Seconds(), r.runs[runRecv2].wall.Seconds())
	}
}

// plainTable is the drain in plain words (issue 37): walrelay's speed to
// Kafka against pg_recvlogical's with its spread over the rounds, the
// floor the WAL's decoding sets (the walsender's cheapest CPU per message
// for it, whichever reader it served), and walrelay's own CPU per message
// beside it, with its spread.
func plainTable(b *strings.Builder, results []result) {
	b.WriteString("In plain words: how fast walrelay drains to Kafka against pg_recvlogical, how much that ratio moves " +
		"from round to round, the walsender's cheapest CPU per message for this WAL (a floor no reader goes under), and " +
		"walrelay's own CPU per message beside it.\n\n")
	b.WriteString("| shape | payload | rounds | kafka / recv, median (lowest–highest round) | recv wall s, lowest–highest | " +
		"walsender floor µs/msg (its reader) | walsender µs/msg for walrelay | walrelay µs/msg, median (lowest–highest) |\n")
	b.WriteString("|" + strings.Repeat("---|", 8) + "\n")
	for _, r := range results {
		rows := float64(r.shape.rows())
		us := func(d time.Duration) float64 { return float64(d.Microseconds()) / rows }
		lo, hi := math.Inf(1), math.Inf(-1)
		wlo, whi := math.Inf(1), math.Inf(-1)
		clo, chi := math.Inf(1), math.Inf(-1)
		floor, floorBy := math.Inf(1), ""
		for _, m := range r.all {
			recv := min(m[runRecv].wall, m[runRecv2].wall)
			ratio := recv.Seconds() / m[runKafka].wall.Seconds() // speed ratio: its msg/s over recv's
			lo, hi = min(lo, ratio), max(hi, ratio)
			for _, run := range []int{runRecv, runRecv2} {
				wlo, whi = min(wlo, m[run].wall.Seconds()), max(whi, m[run].wall.Seconds())
			}
			clo, chi = min(clo, us(m[runKafka].cpu)), max(chi, us(m[runKafka].cpu))
			for run, mm := range m {
				if mm.walsender > 0 && us(mm.walsender) < floor {
					floor, floorBy = us(mm.walsender), runNames[run]
				}
			}
		}
		k := r.runs[runKafka]
		fmt.Fprintf(b, "| %s | %s | %d | %.2f (%.2f–%.2f) | %.2f–%.2f | %.1f (%s) | %.1f | %.1f (%.1f–%.1f) |\n",
			r.shape.name, payloadName(r.payload), len(r.all), r.rate(k)/r.rate(r.baseline()), lo, hi, wlo, whi,
			floor, floorBy, us(k.walsender), us(k.cpu), clo, chi)
	}
}

// cpuTable is the CPU each process spent per message, and the walrelay
// runs' wall times beside the bounds their processes' CPU sets on them.
func cpuTable(b *strings.Builder, results []result) {
	prev := prevBin != ""
	b.WriteString("| shape | payload | walsender µs/msg recv / go / discard / kafka | walsender kafka / lowest client " +
		"| walrelay µs/msg discard / kafka | broker µs/msg (JIT) | discard: bound s / wall s | kafka: bound s / wall s |")
	if prev {
		b.WriteString(" baseline: walsender / walrelay / broker µs/msg | baseline: bound s / wall s | time ratio kafka / baseline |")
	}
	b.WriteString("\n|" + strings.Repeat("---|", 8))
	if prev {
		b.WriteString(strings.Repeat("---|", 3))
	}
	b.WriteString("\n")
	for _, r := range results {
		us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(r.shape.rows()) }
		base, g, d, k, p := r.baseline(), r.runs[runGo], r.runs[runDiscard], r.runs[runKafka], r.runs[runPrev]
		lowest := min(base.walsender, g.walsender)
		fmt.Fprintf(b, "| %s | %s | %.1f / %.1f / %.1f / %.1f | %.2f | %.1f / %.1f | %.1f (%.1f) | %.2f / %.2f | %.2f / %.2f |",
			r.shape.name, payloadName(r.payload),
			us(base.walsender), us(g.walsender), us(d.walsender), us(k.walsender), k.walsender.Seconds()/lowest.Seconds(),
			us(d.cpu), us(k.cpu), us(k.broker), us(k.brokerJIT), bound(d).Seconds(), d.wall.Seconds(), bound(k).Seconds(), k.wall.Seconds())
		if prev {
			fmt.Fprintf(b, " %.1f / %.1f / %.1f | %.2f / %.2f | %.2f |",
				us(p.walsender), us(p.cpu), us(p.broker), bound(p).Seconds(), p.wall.Seconds(), k.wall.Seconds()/p.wall.Seconds())
		}
		b.WriteString("\n")
	}
}

// bound is the shortest wall time a walrelay run's CPU allows on this
// machine: the walsender's, walrelay's and the broker's CPU (none for the
// discarding build) shared by the machine's CPUs, or the largest of them,
// which no process can split.
func bound(m measure) time.Duration {
	sum := m.walsender + m.cpu + m.broker
	return max(sum/time.Duration(runtime.NumCPU()), m.walsender, m.cpu, m.broker)
}

// baseline is the faster of the two pg_recvlogical runs.
func (r result) baseline() measure {
	if r.runs[runRecv2].wall < r.runs[runRecv].wall {
		return r.runs[runRecv2]
	}
	return r.runs[runRecv]
}

// rate is messages per second of run m.
func (r result) rate(m measure) float64 { return float64(r.shape.rows()) / m.wall.Seconds() }
