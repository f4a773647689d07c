package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// Position is one record's place in Kafka.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Mark is every partition's end offset of the fixture's topics at one
// moment: taken at a fault, it splits the duplicates that follow by the
// fault that caused them.
type Mark map[Position]int64 // key: Position with Offset 0

// Mark reads the end offsets of every topic of the fixture.
func (f *Fixture) Mark() Mark {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(f.Brokers, ",")...), Timeout: 30 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{})
	Must(f.t, err, "read metadata")
	req := map[string][]kafka.OffsetRequest{}
	for _, tp := range md.Topics {
		if !strings.HasPrefix(tp.Name, f.TopicPrefix+".") {
			continue
		}
		for _, p := range tp.Partitions {
			req[tp.Name] = append(req[tp.Name], kafka.LastOffsetOf(p.ID))
		}
	}
	m := Mark{}
	if len(req) == 0 {
		return m
	}
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	Must(f.t, err, "list end offsets")
	for topic, parts := range res.Topics {
		for _, p := range parts {
			if p.Error != nil {
				f.t.Fatalf("end offset of %s/%d: %v", topic, p.Partition, p.Error)
			}
			m[Position{Topic: topic, Partition: int32(p.Partition)}] = p.LastOffset
		}
	}
	return m
}

// Records is how many records the mark counts.
func (m Mark) Records() int64 {
	var n int64
	for _, o := range m {
		n += o
	}
	return n
}

// ByFault attributes each duplicate to the last fault marked before it was
// written: marks in the order of the faults. before counts the duplicates
// written before the first fault.
func (r Report) ByFault(marks []Mark) (perFault []int, before int) {
	perFault = make([]int, len(marks))
	for _, pos := range r.Repeats {
		key := Position{Topic: pos.Topic, Partition: pos.Partition}
		i := sort.Search(len(marks), func(i int) bool { return marks[i][key] > pos.Offset })
		if i == 0 {
			before++
		} else {
			perFault[i-1]++
		}
	}
	return perFault, before
}

// Kill sends SIGKILL and waits for the process to be gone.
func (r *Relay) Kill() {
	r.t.Helper()
	r.Cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck // may have exited already
	r.Wait(30 * time.Second)
}

// Wait waits for the process to exit and returns its exit code (-1 when a
// signal ended it).
func (r *Relay) Wait(within time.Duration) int {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(within):
		r.t.Fatalf("walrelay did not exit within %s\n%s", within, r.Stderr.String())
	}
	return r.Cmd.ProcessState.ExitCode()
}

// Exited reports whether the process has ended.
func (r *Relay) Exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Pause stops the process (SIGSTOP) and Resume lets it go on (SIGCONT).
func (r *Relay) Pause()  { r.signal(syscall.SIGSTOP) }
func (r *Relay) Resume() { r.signal(syscall.SIGCONT) }

func (r *Relay) signal(sig syscall.Signal) {
	r.t.Helper()
	if err := r.Cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal walrelay with %v: %v", sig, err)
	}
}

// Scrape returns one metric's value from the relay's /metrics at addr
// (the value of the first line that starts with name), or -1 when absent.
func Scrape(addr, name string) float64 {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return -1
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			fields := strings.Fields(line)
			v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// RepoRoot is the top of the walrelay checkout.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Rig runs one of the rig's scripts (scripts/pg.sh restart fast, say) and
// fails the test when it fails.
func Rig(t *testing.T, script string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(RepoRoot(), "scripts", script), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("scripts/%s %s: %v\n%s", script, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// KafkaPid is the rig broker's process id.
func KafkaPid(t *testing.T) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(Rig(t, "kafka.sh", "pid")))
	Must(t, err, "kafka pid")
	return pid
}

// Env returns a variable of the rig, or fails the test (a skip under -short).
func Env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if testing.Short() {
			t.Skipf("needs %s (make test sets it)", name)
		}
		t.Fatalf("%s is not set: run `make test`", name)
	}
	return v
}

// RSS is the resident memory of a process in bytes, from /proc.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
