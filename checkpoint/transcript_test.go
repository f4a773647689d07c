package checkpoint

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

var update = flag.Bool("update", false, "rewrite testdata transcripts with the current output")

// TestTranscripts replays every testdata/*.txt transcript. A transcript is a
// list of commands, one per line, each starting with "> ":
//
//	> new LSN            start a Tracker at the confirmed position LSN
//	> begin
//	> add ID [N]         N (default 1) messages of txn ID handed to the sink
//	> commit ID LSN
//	> ack ID [N]         N (default 1) acks for txn ID
//	> keepalive LSN
//
// The line after each command is its output: the result, then the Tracker's
// state. Lines starting with "#" and blank lines are comments. Run with
// -update to regenerate the outputs, then review the diff.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("glob testdata: %v, %d files", err, len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := runTranscript(t, string(in))
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != string(in) {
				t.Errorf("%s differs (run with -update and review the diff):\n%s", file, got)
			}
		})
	}
}

// runTranscript executes the commands of a transcript and returns it with
// every output line regenerated.
func runTranscript(t *testing.T, in string) string {
	t.Helper()
	var out strings.Builder
	var tr *Tracker
	for i, line := range strings.Split(strings.TrimRight(in, "\n"), "\n") {
		cmd, ok := strings.CutPrefix(line, "> ")
		if !ok {
			if line == "" || strings.HasPrefix(line, "#") {
				out.WriteString(line + "\n")
			}
			continue // an old output line: regenerated below
		}
		fields := strings.Fields(cmd)
		if fields[0] == "new" {
			tr = New(parseLSN(t, i, fields[1]))
		} else if tr == nil {
			t.Fatalf("line %d: %q before new", i+1, cmd)
		}
		res := step(t, i, tr, fields)
		fmt.Fprintf(&out, "%s\n%s | %s\n", line, res, state(tr))
	}
	return out.String()
}

// step runs one command and describes its result.
func step(t *testing.T, line int, tr *Tracker, f []string) string {
	t.Helper()
	arg := func(k int, def uint64) uint64 {
		if len(f) <= k {
			return def
		}
		n, err := strconv.ParseUint(f[k], 10, 64)
		if err != nil {
			t.Fatalf("line %d: %q: %v", line+1, f, err)
		}
		return n
	}
	switch f[0] {
	case "new":
		return "ok"
	case "begin":
		id, err := tr.Begin()
		return result(fmt.Sprintf("txn %d", id), err)
	case "add":
		return repeat(arg(2, 1), func() error { return tr.Add(TxnID(arg(1, 0))) })
	case "ack":
		return repeat(arg(2, 1), func() error { return tr.Ack(TxnID(arg(1, 0))) })
	case "commit":
		return result("ok", tr.Commit(TxnID(arg(1, 0)), parseLSN(t, line, f[2])))
	case "keepalive":
		if tr.Keepalive(parseLSN(t, line, f[1])) {
			return "taken"
		}
		return "ignored"
	}
	t.Fatalf("line %d: unknown command %q", line+1, f[0])
	return ""
}

func repeat(n uint64, f func() error) string {
	for range n {
		if err := f(); err != nil {
			return result("", err)
		}
	}
	return "ok"
}

func result(ok string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return ok
}

// state prints everything a Tracker exposes.
func state(tr *Tracker) string {
	txns, msgs := tr.InFlight()
	s := fmt.Sprintf("safe=%s txns=%d msgs=%d", tr.Safe(), txns, msgs)
	if id, ok := tr.OldestPending(); ok {
		s += fmt.Sprintf(" oldest=%d", id)
	}
	if tr.Idle() {
		s += " idle"
	}
	return s
}

func parseLSN(t *testing.T, line int, s string) pglogrepl.LSN {
	t.Helper()
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatalf("line %d: %v", line+1, err)
	}
	return lsn
}
