package harness

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit/poll"
)

// Relay is a running walrelay command: `walrelay run`, or another verb
// started in the background (Spawn).
type Relay struct {
	t      *testing.T
	verb   string
	Cmd    *exec.Cmd
	Stderr *syncBuffer // everything it printed
	done   chan struct{}
	err    error
}

// start runs `walrelay init` then `walrelay run` in the background.
func (f *Fixture) Start(extra ...string) *Relay {
	f.t.Helper()
	f.WalrelayOK("init")
	return f.Run(extra...)
}

func (f *Fixture) Run(extra ...string) *Relay {
	f.t.Helper()
	return f.RunEnv(nil, extra...)
}

// RunEnv runs `walrelay run` with extra environment variables (say
// WALRELAY_FAILPOINT=after-ack) on top of the test's own.
func (f *Fixture) RunEnv(env []string, extra ...string) *Relay {
	f.t.Helper()
	return f.Spawn(env, "run", extra...)
}

// Spawn runs `walrelay verb extra...` in the background with extra
// environment variables, its stdout and stderr both in Stderr; it is killed
// in t.Cleanup, and its output logged there if the test failed.
func (f *Fixture) Spawn(env []string, verb string, extra ...string) *Relay {
	f.t.Helper()
	r := &Relay{t: f.t, verb: verb, Stderr: &syncBuffer{}, done: make(chan struct{})}
	r.Cmd = f.Command(context.Background(), env, append([]string{verb}, extra...)...)
	r.Cmd.Stdout, r.Cmd.Stderr = r.Stderr, r.Stderr
	if err := r.Cmd.Start(); err != nil {
		f.t.Fatalf("start walrelay %s: %v", verb, err)
	}
	go func() {
		r.err = r.Cmd.Wait()
		close(r.done)
	}()
	f.t.Cleanup(func() {
		r.Cmd.Process.Kill() //nolint:errcheck // may have exited already
		<-r.done
		if f.t.Failed() {
			f.t.Logf("walrelay %s output:\n%s", r.verb, r.Stderr.String())
		}
	})
	return r
}

// stop waits until the relay streams, sends SIGTERM and returns the exit
// code.
func (r *Relay) Stop() int {
	r.t.Helper()
	r.WaitStarted()
	if err := r.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		r.t.Fatalf("signal walrelay: %v", err)
	}
	select {
	case <-r.done:
	case <-time.After(90 * time.Second):
		r.t.Fatalf("walrelay %s did not stop within 90s of SIGTERM\n%s", r.verb, r.Stderr.String())
	}
	return r.Cmd.ProcessState.ExitCode()
}

// WaitStarted waits until the relay has started replication, failing at
// once when it exits.
func (r *Relay) WaitStarted() {
	r.t.Helper()
	r.WaitLine(`"replication started"`, 60*time.Second)
}

// WaitLine waits until the relay has printed a line containing text and
// returns the first such line; it fails at once when the relay exits.
func (r *Relay) WaitLine(text string, within time.Duration) string {
	r.t.Helper()
	var line string
	poll.EventuallyEvery(r.t, within, 20*time.Millisecond, "a line with "+text+" in its output", func() (string, bool) {
		out := r.Stderr.String()
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, text) {
				line = l
				return "", true
			}
		}
		r.Running()
		return "walrelay output:\n" + out, false
	})
	return line
}

// running fails the test if the relay has exited.
func (r *Relay) Running() {
	r.t.Helper()
	select {
	case <-r.done:
		r.t.Fatalf("walrelay %s exited early (%v):\n%s", r.verb, r.err, r.Stderr.String())
	default:
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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
		r.t.Fatalf("walrelay %s did not exit within %s\n%s", r.verb, within, r.Stderr.String())
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
