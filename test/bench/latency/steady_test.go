//go:build bench

package latency

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/test/bench/benchenv"
	"github.com/walrelay/walrelay/test/harness"
)

// steadyRates are TestBenchSteady's rates, transactions per second (issue
// 37), and steadyRatesEnv overrides them (comma-separated).
var steadyRates = []int{200, 1000, 2500}

const steadyRatesEnv = "WALRELAY_BENCH_STEADY_RATES"

// steadyPayloadFormat is the steady load's payload, about 60 bytes of JSON
// (issue 37); its one verb is the row's number. kafkafloor gets the same.
const steadyPayloadFormat = `{"order_id":"ord-%09d","status":"placed","amount":42.5}`

func steadyPayload(n int) string { return fmt.Sprintf(steadyPayloadFormat, n) }

// ratioTarget is issue 37's target: walrelay's CPU per message at most
// this many times pg_recvlogical's, on the same WAL at the same time.
const ratioTarget = 2

// TestBenchSteady is the CPU a steady load costs (issue 37): at each rate,
// measure's run (a paced writer of single-row transactions, walrelay to
// Kafka) with pg_recvlogical beside it on a second slot of the same
// publication, every process's CPU read from /proc over the measured
// window only; then a bare kafka-go Writer (test/bench/kafkafloor)
// producing as many records of the same shape at the same rate, the
// floor the Kafka client sets. Figures are reported, not asserted.
func TestBenchSteady(t *testing.T) {
	window := max(10*time.Second, time.Duration(float64(20*time.Second)*benchenv.Scale(t)))
	flags := relayFlags()
	env := machine(t)
	recv := recvlogicalBin(t)
	floor, err := benchenv.BuildPkg(t.TempDir(), "kafkafloor", "bench", "./test/bench/kafkafloor")
	testkit.Must(t, err, "build kafkafloor")
	builds := []steadyBuild{{"this tree", harness.Binary}}
	if baselineBin != "" { // the baseline first at each rate, then this tree
		builds = append([]steadyBuild{{os.Getenv(baselineEnv), baselineBin}}, builds...)
	}
	defer func(bin string) { harness.Binary = bin }(harness.Binary)
	var results []steadyResult
	for _, rate := range ratesFrom(t, steadyRatesEnv, steadyRates) {
		for _, b := range builds {
			harness.Binary = b.bin
			var r steadyResult
			name := fmt.Sprintf("%d_tx_per_s", rate)
			if len(builds) > 1 {
				name += "/" + strings.ReplaceAll(b.name, " ", "_")
			}
			if !t.Run(name, func(t *testing.T) { r = measureSteady(t, rate, window, flags, recv, floor) }) {
				return // a run that did not complete has no figures to report
			}
			r.build = b.name
			results = append(results, r)
		}
	}
	t.Logf("CPU at steady load:\n%s", renderSteady(results))
	writeSteadyReport(t, env, flags, window, recv, results)
}

// steadyResult is one rate's row.
type steadyResult struct {
	build string // which walrelay: "this tree", or the baseline's revision
	r     result // measure's: the writer's pace, the histogram, the surroundings
	side
	floor floorResult
}

// steadyBuild is a walrelay binary TestBenchSteady measures.
type steadyBuild struct{ name, bin string }

// measureSteady is one rate: walrelay and pg_recvlogical on the writer's
// WAL, then the floor.
func measureSteady(t *testing.T, rate int, window time.Duration, flags []string, recvBin, floorBin string) steadyResult {
	s := &side{recvBin: recvBin}
	r := measureWith(t, runSpec{rate: rate, window: window, flags: flags, payload: steadyPayload, beside: s.hooks()})
	s.figures(r.pace.achieved * window.Seconds())
	fl := runFloor(t, floorBin, s.f, rate, window, kafkaLinger(flags))
	return steadyResult{r: r, side: *s, floor: fl}
}

// The processes whose CPU a steady run reads, indexes into side's arrays.
const (
	relayProc   = iota // walrelay
	relaySender        // the walsender serving walrelay's slot
	recvProc           // pg_recvlogical
	recvSender         // the walsender serving pg_recvlogical's slot
	brokerProc         // the rig's Kafka broker (issue 48: its CPU a record)
	procCount
)

// side runs pg_recvlogical beside measure's walrelay and reads both, and
// their walsenders, at the window's start and end.
type side struct {
	recvBin string
	f       *harness.Fixture
	relay   *harness.Relay
	addr    string // walrelay's metrics
	recv    *harness.Process
	slot    string // pg_recvlogical's

	pids              [procCount]int
	from, to          [procCount]reading
	begun, ended      time.Time
	requestsFrom      float64
	requestsTo        float64
	rss, peakRSS      int64              // walrelay's at the window's end
	usPerMsg          [procCount]float64 // CPU per message in the window; NaN if unknown
	switchesPerMsg    [procCount]float64 // context switches per message in the window; NaN if unknown
	requestsPerSec    float64            // walrelay's produce requests
	recordsPerRequest float64            // messages over produce requests
}

func (s *side) hooks() *beside { return &beside{start: s.start, begin: s.begin, end: s.end} }

// start makes pg_recvlogical's slot on the fixture's publication and
// starts it reading, before the writer writes anything.
func (s *side) start(t *testing.T, f *harness.Fixture, relay *harness.Relay, addr string) []int {
	t.Helper()
	s.f, s.relay, s.addr, s.slot = f, relay, addr, f.Slot+"_recv"
	f.PG.DropSlot(s.slot)
	_, err := f.DB.Exec(context.Background(), "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", s.slot)
	testkit.Must(t, err, "create slot %s", s.slot)
	s.recv = harness.StartProcess(t, "pg_recvlogical", s.recvBin, nil, "-d", f.PGURL, "--start", "-S", s.slot,
		"-o", "proto_version=1", "-o", "publication_names="+f.Publication, "--no-loop", "-f", "/dev/null")
	poll.EventuallyEvery(t, 30*time.Second, 50*time.Millisecond, "pg_recvlogical reading slot "+s.slot, func() (string, bool) {
		s.recv.Running()
		return "pg_recvlogical's output:\n" + s.recv.Tail(20), activePID(t, f, s.slot) != 0
	})
	return []int{s.recv.Pid()}
}

// begin reads every process's CPU and walrelay's produce requests.
func (s *side) begin(t *testing.T) {
	t.Helper()
	s.recv.Running()
	s.pids = [procCount]int{s.relay.Cmd.Process.Pid, activePID(t, s.f, s.f.Slot), s.recv.Pid(), activePID(t, s.f, s.slot), rig.KafkaPid(t)}
	s.from, s.requestsFrom, s.begun = s.read(), s.produceRequests(t), time.Now()
}

// end reads them again, walrelay's memory, and stops pg_recvlogical (the
// floor runs next, without it).
func (s *side) end(t *testing.T) {
	t.Helper()
	s.recv.Running()
	s.to, s.requestsTo, s.ended = s.read(), s.produceRequests(t), time.Now()
	// A walsender that changed means its reader reconnected in the window:
	// the one read at the start no longer counts all of its CPU.
	for i, slot := range map[int]string{relaySender: s.f.Slot, recvSender: s.slot} {
		if activePID(t, s.f, slot) != s.pids[i] {
			s.to[i] = unread
		}
	}
	var ok bool
	s.rss, s.peakRSS, ok = benchenv.Memory(s.pids[relayProc])
	if !ok {
		t.Fatalf("read walrelay's memory from /proc/%d/status", s.pids[relayProc])
	}
	s.recv.Stop() // its exit status on SIGTERM says nothing: it ran until now
}

// reading is one process's counters at one time.
type reading struct {
	cpu      time.Duration
	switches int64
}

// unread is the reading of a process that could not be read.
var unread = reading{cpu: -1, switches: -1}

// readProc reads pid's CPU time and context switches so far.
func readProc(pid int) reading {
	cpu, ok1 := benchenv.TaskCPU(pid)
	switches, ok2 := benchenv.ContextSwitches(pid)
	if pid == 0 || !ok1 || !ok2 {
		return unread
	}
	return reading{cpu: cpu, switches: switches}
}

// read is each process's reading now.
func (s *side) read() [procCount]reading {
	var out [procCount]reading
	for i, pid := range s.pids {
		out[i] = readProc(pid)
	}
	return out
}

// perMessage is the CPU time (µs) and the context switches from one
// reading to a later one, per message; NaN where either is unread.
func perMessage(from, to reading, messages float64) (us, switches float64) {
	if from == unread || to == unread || messages <= 0 {
		return math.NaN(), math.NaN()
	}
	return float64((to.cpu - from.cpu).Microseconds()) / messages, float64(to.switches-from.switches) / messages
}

// produceRequests is walrelay_produce_requests_total summed over topics.
func (s *side) produceRequests(t *testing.T) float64 {
	t.Helper()
	sums, err := harness.ScrapeSums(s.addr)
	testkit.Must(t, err, "scrape walrelay")
	n, ok := sums["walrelay_produce_requests_total"]
	if !ok {
		t.Fatalf("walrelay's /metrics has no walrelay_produce_requests_total")
	}
	return n
}

// figures turns the window's readings into figures per message: messages
// is how many COMMITs returned in the window.
func (s *side) figures(messages float64) {
	for i := range s.usPerMsg {
		s.usPerMsg[i], s.switchesPerMsg[i] = perMessage(s.from[i], s.to[i], messages)
	}
	requests := s.requestsTo - s.requestsFrom
	s.requestsPerSec = requests / s.ended.Sub(s.begun).Seconds()
	s.recordsPerRequest = math.NaN()
	if requests > 0 {
		s.recordsPerRequest = messages / requests
	}
}

// recvlogicalBin is pg_recvlogical of the rig's PostgreSQL
// (WALRELAY_TEST_PG_BIN), else PostgreSQL 15's from Debian's packages, as
// the drain benchmark runs, else one on PATH.
func recvlogicalBin(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/lib/postgresql/15/bin/pg_recvlogical"}
	if dir := os.Getenv("WALRELAY_TEST_PG_BIN"); dir != "" {
		candidates = append([]string{filepath.Join(dir, "pg_recvlogical")}, candidates...)
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	p, err := exec.LookPath("pg_recvlogical")
	testkit.Must(t, err, "find pg_recvlogical")
	return p
}

// kafkaLinger is walrelay's --kafka-linger in flags, or its default.
func kafkaLinger(flags []string) time.Duration {
	linger := 5 * time.Millisecond
	for i, f := range flags {
		v, ok := strings.CutPrefix(f, "--kafka-linger=")
		if !ok && f == "--kafka-linger" && i+1 < len(flags) {
			v, ok = flags[i+1], true
		}
		if d, err := time.ParseDuration(v); ok && err == nil {
			linger = d
		}
	}
	return linger
}

// floorResult is the bare kafka-go Writer's run at one rate.
type floorResult struct {
	usPerMsg       float64 // CPU per record due in the window
	switchesPerMsg float64 // context switches per record due in the window
	requestsPerSec float64 // produce requests over its whole run
}

// runFloor runs kafkafloor at rate on a topic of the fixture's own, with
// measure's warm-up, window and tail, and reads its CPU over the window.
func runFloor(t *testing.T, bin string, f *harness.Fixture, rate int, window, linger time.Duration) floorResult {
	t.Helper()
	topic := f.Topic("floor")
	f.CreateTopics(topic)
	warmup, tail := warmupFor(window), time.Second
	total := int(int64(rate) * int64(warmup+window+tail) / int64(time.Second))
	base := time.Now().Add(200 * time.Millisecond)
	p := harness.StartProcess(t, "kafkafloor", bin, nil, "-brokers", f.Brokers, "-topic", topic,
		"-rate", strconv.Itoa(rate), "-count", strconv.Itoa(total), "-start", strconv.FormatInt(base.UnixNano(), 10),
		"-payload", steadyPayloadFormat, "-linger", linger.String())
	from := readAt(t, p, base.Add(warmup))
	to := readAt(t, p, base.Add(warmup+window))
	p.Wait(60*time.Second + tail)
	var acked, requests int
	if _, err := fmt.Sscanf(p.Tail(1), "acked %d requests %d", &acked, &requests); err != nil || acked != total {
		t.Fatalf("kafkafloor: got %q; want \"acked %d requests N\"", p.Tail(10), total)
	}
	fl := floorResult{requestsPerSec: float64(requests) / time.Since(base).Seconds()}
	fl.usPerMsg, fl.switchesPerMsg = perMessage(from, to, float64(rate)*window.Seconds())
	return fl
}

// readAt waits until at and reads p, failing if p has exited.
func readAt(t *testing.T, p *harness.Process, at time.Time) reading {
	t.Helper()
	time.Sleep(time.Until(at))
	p.Running()
	r := readProc(p.Pid())
	if r == unread {
		t.Fatalf("read %s's CPU time and context switches from /proc", p.Name)
	}
	return r
}
