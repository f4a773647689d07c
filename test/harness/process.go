package harness

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
)

// Process is a program a test runs besides walrelay (an example service, a
// consumer), its output captured. It is killed in t.Cleanup, and its last
// output lines are logged there if the test failed.
type Process struct {
	t    *testing.T
	Name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// StartProcess runs bin with args, the environment plus env.
func StartProcess(t *testing.T, name, bin string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{t: t, Name: name, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	testkit.Must(t, p.cmd.Start(), "start %s", name)
	go func() {
		p.cmd.Wait() //nolint:errcheck // the exit status is read from ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill() //nolint:errcheck // may have exited already
		<-p.done
		if t.Failed() {
			t.Logf("%s output (last lines):\n%s", name, p.Tail(60))
		}
	})
	return p
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output is everything the process printed so far.
func (p *Process) Output() string { return p.out.String() }

// Tail is the last n lines of the output.
func (p *Process) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.out.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Running fails the test if the process has exited.
func (p *Process) Running() {
	p.t.Helper()
	select {
	case <-p.done:
		p.t.Fatalf("%s exited early (%s):\n%s", p.Name, p.cmd.ProcessState, p.Tail(30))
	default:
	}
}

// Wait waits for the process to exit, failing the test if it does not
// within the bound, or if one of others exits meanwhile.
func (p *Process) Wait(within time.Duration, others ...*Process) {
	p.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case <-p.done:
			return
		case <-deadline:
			p.t.Fatalf("%s did not exit within %s:\n%s", p.Name, within, p.Tail(30))
		case <-time.After(100 * time.Millisecond):
			for _, o := range others {
				o.Running()
			}
		}
	}
}

// WaitFailpoint waits for the process to die by the failpoint spec (it ran
// with WALRELAY_FAILPOINT=spec): SIGKILL, after printing "failpoint spec:".
func (p *Process) WaitFailpoint(spec string, within time.Duration, others ...*Process) {
	p.t.Helper()
	p.Wait(within, others...)
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("%s with WALRELAY_FAILPOINT=%s ended with %s; want death by SIGKILL:\n%s", p.Name, spec, p.cmd.ProcessState, p.Tail(30))
	}
	if line := "failpoint " + spec + ":"; !strings.Contains(p.Output(), line) {
		p.t.Fatalf("%s output lacks %q:\n%s", p.Name, line, p.Tail(30))
	}
}

// Stop sends SIGTERM, waits up to 30 s, and returns the exit code.
func (p *Process) Stop() int {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // may have exited already
	p.Wait(30 * time.Second)
	return p.cmd.ProcessState.ExitCode()
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
