//go:build bench

package latency

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// renderSteady is the steady-load table, one row per rate.
func renderSteady(results []steadyResult) string {
	var b strings.Builder
	b.WriteString("| walrelay | target tx/s | achieved tx/s | walrelay µs/msg | its walsender µs/msg | pg_recvlogical µs/msg | its walsender µs/msg | walrelay / pg_recvlogical | <= 2x | kafka-go floor µs/msg | walrelay / floor | context switches/msg walrelay / pg_recvlogical / floor | walrelay RSS MiB peak / end | commit-to-ack p50 | p99 | produce requests/s (msgs each) | floor requests/s | Kafka broker µs/msg | machine CPU busy | other busy programs |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, s := range results {
		us := s.usPerMsg
		ratio := us[relayProc] / us[recvProc]
		fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s | %.0f / %.0f | %s | %s | %.0f (%s) | %.0f | %s | %.0f%% | %s |\n",
			s.build, s.r.rate, s.r.pace.achieved,
			orNA("%.1f", us[relayProc]), orNA("%.1f", us[relaySender]), orNA("%.1f", us[recvProc]), orNA("%.1f", us[recvSender]),
			orNA("%.2fx", ratio), met(ratio), orNA("%.1f", s.floor.usPerMsg), orNA("%.2fx", us[relayProc]/s.floor.usPerMsg),
			orNA("%.1f", s.switchesPerMsg[relayProc]), orNA("%.1f", s.switchesPerMsg[recvProc]), orNA("%.1f", s.floor.switchesPerMsg),
			float64(s.peakRSS)/(1<<20), float64(s.rss)/(1<<20),
			est(s.r.hist.quantile(.5)), est(s.r.hist.quantile(.99)),
			s.requestsPerSec, orNA("%.1f", s.recordsPerRequest), s.floor.requestsPerSec, orNA("%.1f", us[brokerProc]),
			100*s.r.around.machineCPU, s.r.around.neighbours)
	}
	return b.String()
}

// met says whether a ratio is within ratioTarget.
func met(ratio float64) string {
	switch {
	case math.IsNaN(ratio):
		return "n/a"
	case ratio <= ratioTarget:
		return "met"
	}
	return "not met"
}

// writeSteadyReport writes steady.md beside latency.md.
func writeSteadyReport(t *testing.T, e environment, flags []string, window time.Duration, recvBin string, results []steadyResult) {
	t.Helper()
	scale := e.benchScaleSetting
	if scale == "" {
		scale = "1"
	}
	// The benchmarks are in the test module (test/go.mod): go test runs there.
	cmd := "WALRELAY_BENCH_SCALE=" + scale + " go test -tags bench -run TestBenchSteady -count=1 -timeout 30m -v ./bench/latency"
	if s := os.Getenv(steadyRatesEnv); s != "" {
		cmd = steadyRatesEnv + "=" + s + " " + cmd
	}
	if rev := os.Getenv(baselineEnv); rev != "" {
		cmd = baselineEnv + "=" + rev + " " + cmd
	}
	var b strings.Builder
	b.WriteString("## CPU at steady load (issue 37)\n\n")
	fmt.Fprintf(&b, "Reproduce (rig running, `eval \"$(scripts/rig.sh env)\"`): `cd test && %s`\n\n", withRelayFlags(cmd, flags))
	b.WriteString(e.line() + "\n\n")
	fmt.Fprintf(&b, "Each rate: the latency benchmark's run (a fresh outbox, slot and 3-partition topic; walrelay with %s; "+
		"the paced writer of single-row INSERT transactions, a uuid and a %d-byte JSON payload, on %d connections) and, "+
		"at the same time, %s (pgoutput, proto_version 1, to /dev/null) reading a second slot of the same publication; "+
		"a measured window of %s after a warm-up of %s; then the kafka-go floor alone. Load average after: %s.\n\n",
		relaySetting(flags), len(steadyPayload(0)), writerConns, recvVersion(recvBin), window, warmupFor(window), benchenv.LoadAverage())
	b.WriteString(renderSteady(results))
	b.WriteString(`
- *walrelay*: which build ran the row: this tree, or (with ` + "`" + baselineEnv + "=REV`" + `) the baseline built at that
  git revision, measured just before this tree at the same rate, for a before/after on the same machine in one run.
- *µs/msg*: the process's CPU time (user + system, the sum of its threads' /proc/<pid>/task/<tid>/schedstat, in ns)
  over the measured window only, per COMMIT the writer saw return in the window. *walrelay*: the relay process;
  *its walsender*: the PostgreSQL process serving walrelay's slot (the slot's active_pid); *pg_recvlogical* and
  *its walsender* the same for the second slot. Both readers decode the same WAL at the same time; n/a where a
  process could not be read, or a walsender changed in the window (its reader reconnected).
- *walrelay / pg_recvlogical*: the ratio of their µs/msg; *<= 2x* is issue 37's target for it. It is a figure, never
  a failure.
- *kafka-go floor*: test/bench/kafkafloor, a bare kafka-go Writer (asynchronous, Murmur2Balancer, RequiredAcks all,
  walrelay's linger and batch bounds: 500 records, 512 KiB) in a process of its own, producing as many records of
  the same shape (key, payload, walrelay's CloudEvents headers) at the same rate to a topic of its own, after
  walrelay's run, with the same warm-up and window; its CPU per record due in the window, read the same way.
  *walrelay / floor*: how far above what the Kafka client alone costs walrelay sits.
- *context switches/msg*: how often the process's threads left a CPU in the window (voluntary_ctxt_switches +
  nonvoluntary_ctxt_switches of each /proc/<pid>/task/<tid>/status), per message: its sleeps and wake-ups, for
  walrelay, pg_recvlogical and the floor.
- *walrelay RSS*: VmHWM (the peak since its start) and VmRSS of /proc/<pid>/status at the window's end.
- *commit-to-ack*: walrelay_commit_to_ack_seconds, the difference of the buckets scraped at the window's start and
  end, estimates within the bucket shown (see the latency benchmark's notes).
- *produce requests/s*: walrelay_produce_requests_total summed over its labels (topics), scraped at the window's
  start and end, per second of the window; *msgs each*: the window's messages over its requests. *floor
  requests/s*: the floor's produce requests (its Writer's Stats) over its whole run.
- *Kafka broker µs/msg*: the rig's broker process (scripts/kafka.sh pid), its CPU over the window per message, as
  for walrelay: what the requests cost the broker (it also serves the latency probe's consumer, the same for
  every build).
- *machine CPU busy*: /proc/stat over the window, every process on the machine. *other busy programs*: as in the
  latency benchmark (other test binaries, walrelay and pg_recvlogical processes not of this run, the Go
  toolchain, autovacuum), seen in the window; this run's own pg_recvlogical is not one.
- Every committed message arrived (a missing one, a relay or pg_recvlogical that died, or a floor record not
  acknowledged fails the benchmark).
`)
	benchenv.WriteReport(t, "steady.md", b.String())
}

// recvVersion is what pg_recvlogical --version says, else its path.
func recvVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "pg_recvlogical (" + bin + ")"
	}
	return strings.TrimSpace(string(out))
}
