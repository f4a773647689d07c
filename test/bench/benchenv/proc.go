//go:build bench

package benchenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of /proc's CPU times (USER_HZ, 100 on every Linux
// this runs on).
const clockTicks = 100

// ProcCPU is the user + system time of pid from /proc/<pid>/stat: for a
// walsender or the Kafka broker, PostgreSQL and Kafka must run on this
// machine, as the rig's do.
func ProcCPU(pid int) (time.Duration, bool) { return StatCPU(fmt.Sprintf("/proc/%d/stat", pid)) }

// StatCPU is the user + system time in a /proc stat file, a process's or
// one of its threads' (/proc/<pid>/task/<tid>/stat).
func StatCPU(path string) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces; count from after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}

// TaskCPU is pid's time on a CPU, the sum over its threads of
// /proc/<pid>/task/<tid>/schedstat (nanoseconds). ProcCPU counts in ticks
// of 10 ms: over a window of seconds that is a tenth of what
// pg_recvlogical or a walsender spends at 200 messages per second. A thread
// that has exited is not counted: read it for processes that keep theirs
// (PostgreSQL's backends and pg_recvlogical have one; Go programs keep
// theirs).
func TaskCPU(pid int) (time.Duration, bool) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += time.Duration(ns)
	}
	return sum, true
}

// Memory is pid's resident set now and its peak so far (VmRSS and VmHWM of
// /proc/<pid>/status), in bytes.
func Memory(pid int) (rss, peak int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	var found int
	for _, line := range strings.Split(string(b), "\n") {
		name, value, _ := strings.Cut(line, ":")
		f := strings.Fields(value)
		if (name != "VmRSS" && name != "VmHWM") || len(f) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
		found++
	}
	return rss, peak, found == 2
}

// ContextSwitches is how often pid's threads have left a CPU so far, the
// sum of voluntary_ctxt_switches and nonvoluntary_ctxt_switches of each
// /proc/<pid>/task/<tid>/status: how often it went to sleep or was put
// off, the wake-ups a steady load costs. Exited threads are not counted,
// as in TaskCPU.
func ContextSwitches(pid int) (int64, bool) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*/status", pid))
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var sum int64
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			name, value, _ := strings.Cut(line, ":")
			if name != "voluntary_ctxt_switches" && name != "nonvoluntary_ctxt_switches" {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil {
				return 0, false
			}
			sum += n
		}
	}
	return sum, true
}
