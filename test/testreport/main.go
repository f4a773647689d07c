// Command testreport is the reader of `go test -json` that make test runs
// every stage through (scripts/gotest.sh). It is internal to walrelay's
// test run; nothing else has a use for it.
//
//	go test -json ... | testreport filter [-v] FILE
//
// copies the events to FILE and prints what a plain `go test` prints: the
// build errors, each package's closing line (ok, FAIL, no test files), and
// the whole output of every test that failed or skipped (with -v, of every
// test). Its exit status is go test's to give: filter exits 0 unless it
// cannot read or write.
//
//	testreport slowest N FILE...
//
// prints the N slowest top-level tests of the files, slowest first, with
// their result, the run they were in (the file's name) and their package.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time       time.Time `json:",omitempty"`
	Action     string
	Package    string  `json:",omitempty"`
	ImportPath string  `json:",omitempty"` // build-output and build-fail
	Test       string  `json:",omitempty"`
	Elapsed    float64 `json:",omitempty"`
	Output     string  `json:",omitempty"`
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: testreport filter [-v] FILE | testreport slowest N FILE...")
	}
	switch args[0] {
	case "filter":
		fs := flag.NewFlagSet("filter", flag.ContinueOnError)
		verbose := fs.Bool("v", false, "print the output of every test")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: testreport filter [-v] FILE")
		}
		return filter(stdin, stdout, fs.Arg(0), *verbose)
	case "slowest":
		var n int
		if len(args) < 3 {
			return errors.New("usage: testreport slowest N FILE...")
		}
		if _, err := fmt.Sscan(args[1], &n); err != nil || n < 1 {
			return fmt.Errorf("slowest: %q is not a count", args[1])
		}
		return slowest(stdout, n, args[2:])
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// filter copies the events to file and prints them as plain go test does,
// holding each test's output until its result says whether to print it.
func filter(in io.Reader, out io.Writer, file string, verbose bool) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(out)
	defer w.Flush()
	held := map[string]*strings.Builder{} // package + test -> its output so far
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if _, err := f.Write(append(line, '\n')); err != nil {
			return err
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event: go test's own words (a flag error, say).
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		switch {
		case e.Action == "build-output":
			w.WriteString(e.Output)
		case e.Test == "":
			// The package's own lines: its closing line, a panic in
			// TestMain, the output of a test binary that crashed.
			if e.Action == "output" {
				w.WriteString(e.Output)
			}
		case verbose:
			if e.Action == "output" {
				w.WriteString(e.Output)
			}
		default:
			// A subtest's lines go with its top-level test's, printed
			// together when that one fails or skips.
			top, _, isSub := strings.Cut(e.Test, "/")
			key := e.Package + " " + top
			switch {
			case e.Action == "output":
				b := held[key]
				if b == nil {
					b = &strings.Builder{}
					held[key] = b
				}
				b.WriteString(e.Output)
			case isSub:
			case e.Action == "fail" || e.Action == "skip":
				if b := held[key]; b != nil {
					w.WriteString(b.String())
				}
				delete(held, key)
			case e.Action == "pass":
				delete(held, key)
			}
		}
		if e.Test == "" && e.Action != "output" {
			w.Flush()
		}
	}
	return sc.Err()
}

type result struct {
	run, pkg, test, action string
	elapsed                float64
}

// slowest prints the n slowest top-level tests of the files.
func slowest(out io.Writer, n int, files []string) error {
	var all []result
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" || strings.Contains(e.Test, "/") {
				continue
			}
			if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
				all = append(all, result{run: strings.TrimSuffix(filepath.Base(name), ".json"), pkg: e.Package, test: e.Test, action: e.Action, elapsed: e.Elapsed})
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	slices.SortStableFunc(all, func(a, b result) int { return cmp.Compare(b.elapsed, a.elapsed) })
	fmt.Fprintf(out, "The %d slowest of %d tests:\n", min(n, len(all)), len(all))
	for _, r := range all[:min(n, len(all))] {
		fmt.Fprintf(out, "%8.1fs  %-4s  %-10s %s %s\n", r.elapsed, r.action, r.run, strings.TrimPrefix(r.pkg, "github.com/walrelay/walrelay/"), r.test)
	}
	return nil
}
