//go:build bench

package latency

import (
	"context"
	"math"
	"os"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/bench/benchenv"
	"github.com/walrelay/walrelay/test/harness"
)

// surroundings are what else went on during the measured window: how busy
// the machine and the cluster were, how fast Kafka acknowledged a lone
// record, and which other busy programs ran. On a 2-core machine shared
// with other work they decide whether a figure describes walrelay.
type surroundings struct {
	machineCPU  float64         // busy share of the whole machine's CPU
	walsender   float64         // the slot's walsender's CPU time over the window's wall time, in cores; NaN if unknown
	walRate     float64         // bytes of WAL the whole cluster wrote per second
	checkpoints int64           // PostgreSQL checkpoints that began
	probe       []time.Duration // Kafka's acknowledgement of a lone record, sorted
	probeErrs   int
	neighbours  string // other busy programs seen
}

// watch collects the surroundings from startWatch to end.
type watch struct {
	f     *harness.Fixture
	probe *probe
	nb    *neighbours
	cpu   cpuTimes
	wsPID int // the slot's walsender, 0 if unknown
	wsCPU time.Duration
	wal   pglogrepl.LSN
	ckpt  int64
	start time.Time
}

// startWatch begins the window's watch; own are the benchmark's own
// processes (its walrelay, say), not neighbours.
func startWatch(t *testing.T, f *harness.Fixture, pr *probe, own ...int) *watch {
	t.Helper()
	pr.take() // drops the warm-up's round trips
	w := &watch{
		f: f, probe: pr, nb: watchNeighbours(append(own, os.Getpid())...),
		cpu: readCPU(), wal: f.CurrentLSN(), ckpt: checkpoints(t, f.DB), start: time.Now(),
	}
	if pid := activePID(t, f, f.Slot); pid != 0 {
		if cpu, ok := benchenv.ProcCPU(pid); ok {
			w.wsPID, w.wsCPU = pid, cpu
		}
	}
	return w
}

func (w *watch) end(t *testing.T) surroundings {
	t.Helper()
	s := surroundings{machineCPU: readCPU().busySince(w.cpu), walsender: math.NaN()}
	elapsed := time.Since(w.start)
	if cpu, ok := benchenv.ProcCPU(w.wsPID); ok && w.wsPID != 0 {
		s.walsender = (cpu - w.wsCPU).Seconds() / elapsed.Seconds()
	}
	s.walRate = float64(w.f.CurrentLSN()-w.wal) / elapsed.Seconds()
	s.checkpoints = checkpoints(t, w.f.DB) - w.ckpt
	s.probe, s.probeErrs = w.probe.take()
	s.neighbours = w.nb.end()
	w.probe.end()
	return s
}

// checkpoints is how many checkpoints PostgreSQL has started (timed and
// requested): from pg_stat_checkpointer on PostgreSQL 17 and later, which
// moved them there, from pg_stat_bgwriter before.
func checkpoints(t *testing.T, db *pgxpool.Pool) int64 {
	t.Helper()
	ctx := context.Background()
	var version int
	err := db.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version)
	testkit.Must(t, err, "read server_version_num")
	query := "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
	if version >= 170000 {
		query = "SELECT num_timed + num_requested FROM pg_stat_checkpointer"
	}
	var n int64
	err = db.QueryRow(ctx, query).Scan(&n)
	testkit.Must(t, err, "read the checkpoint counts")
	return n
}

// activePID is the walsender serving slot (the slot's active_pid), 0
// while no one reads it.
func activePID(t *testing.T, f *harness.Fixture, slot string) int {
	t.Helper()
	var pid int
	err := f.DB.QueryRow(context.Background(),
		"SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid)
	testkit.Must(t, err, "read the walsender of slot %s", slot)
	return pid
}
