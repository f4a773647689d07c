//go:build bench

package benchenv

import (
	"fmt"
	"os"
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
