package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/walrelay/walrelay/internal/texttable"
)

// Status is the verdict of one check.
type Status int

const (
	// OK: as walrelay needs it.
	OK Status = iota
	// Warn: walrelay works, but the setting is a risk an operator should
	// know about.
	Warn
	// Fail: walrelay will not work (or will lose its guarantees) until the
	// fix is applied.
	Fail
)

var statusNames = [...]string{OK: "ok", Warn: "warn", Fail: "fail"}

// String is "ok", "warn" or "fail".
func (s Status) String() string {
	if s < 0 || int(s) >= len(statusNames) {
		return fmt.Sprintf("status(%d)", int(s))
	}
	return statusNames[s]
}

// MarshalText writes the status as its String, so JSON carries "ok", "warn"
// or "fail".
func (s Status) MarshalText() ([]byte, error) {
	if s < 0 || int(s) >= len(statusNames) {
		return nil, fmt.Errorf("unknown check status %d", int(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads what MarshalText wrote.
func (s *Status) UnmarshalText(b []byte) error {
	for i, name := range statusNames {
		if string(b) == name {
			*s = Status(i)
			return nil
		}
	}
	return fmt.Errorf("unknown check status %q", b)
}

// Result is what one check found.
type Result struct {
	// Name identifies the check, e.g. "wal_level" or "topic orders
	// replication factor".
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Found is what the check saw, with the values that led to Status.
	Found string `json:"found"`
	// Fix is one sentence saying what to change; empty when Status is OK.
	Fix string `json:"fix,omitempty"`
}

// Pass is an OK result.
func Pass(name, found string) Result { return Result{Name: name, Status: OK, Found: found} }

// Warning is a Warn result with its fix.
func Warning(name, found, fix string) Result {
	return Result{Name: name, Status: Warn, Found: found, Fix: fix}
}

// Failure is a Fail result with its fix.
func Failure(name, found, fix string) Result {
	return Result{Name: name, Status: Fail, Found: found, Fix: fix}
}

// Report is the results of a preflight, in the order they were made.
type Report []Result

// Count returns how many results have status s.
func (r Report) Count(s Status) int {
	n := 0
	for _, res := range r {
		if res.Status == s {
			n++
		}
	}
	return n
}

// Failed reports whether any result is a Fail. Warnings alone do not fail
// a preflight.
func (r Report) Failed() bool { return r.Count(Fail) > 0 }

// Err is the error a preflight with this report fails with, saying how
// many checks failed; nil when none did (warnings alone do not fail it).
func (r Report) Err() error {
	switch n := r.Count(Fail); n {
	case 0:
		return nil
	case 1:
		return errors.New("1 check failed")
	default:
		return fmt.Errorf("%d checks failed", n)
	}
}

// WriteText writes one line per result, the status, name and found columns
// aligned (texttable's rule), the fix after the found text, and a closing
// line with the counts. Line breaks inside a field (a multi-line server
// error) are folded, so each result stays on one line.
func (r Report) WriteText(w io.Writer) error {
	rows := make([][]string, len(r))
	for i, res := range r {
		found := oneLine(res.Found)
		if res.Fix != "" {
			found += "  fix: " + oneLine(res.Fix)
		}
		// The status column is as wide as "warn" even when every result is ok.
		rows[i] = []string{fmt.Sprintf("%-4s", res.Status), oneLine(res.Name), found}
	}
	var b strings.Builder
	if err := texttable.Write(&b, rows); err != nil {
		return err
	}
	fmt.Fprintf(&b, "%d ok, %d warn, %d fail\n", r.Count(OK), r.Count(Warn), r.Count(Fail))
	_, err := io.WriteString(w, b.String())
	return err
}

// oneLine replaces line breaks and tabs by spaces and trims the ends.
func oneLine(s string) string {
	return strings.TrimSpace(strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s))
}

// jsonReport is the JSON form of a Report.
type jsonReport struct {
	Checks []Result `json:"checks"`
	OK     int      `json:"ok"`
	Warn   int      `json:"warn"`
	Fail   int      `json:"fail"`
	Failed bool     `json:"failed"`
}

// WriteJSON writes the report as one JSON object: "checks" (each with name,
// status, found and, unless ok, fix), the counts "ok", "warn" and "fail",
// and "failed".
func (r Report) WriteJSON(w io.Writer) error {
	checks := []Result(r)
	if checks == nil {
		checks = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jsonReport{Checks: checks, OK: r.Count(OK), Warn: r.Count(Warn), Fail: r.Count(Fail), Failed: r.Failed()})
}
