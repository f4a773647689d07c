package e2e

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// Bad configuration fails fast with one clear line and a non-zero exit.
func TestBadConfigurationFailsFast(t *testing.T) {
	f := harness.New(t, "order")
	f.WalrelayOK("init")
	cases := []struct {
		name string
		args []string
		want string // in the error line
	}{
		{"unreachable postgres", []string{"--postgres-url", "postgres://walrelay:walrelay@127.0.0.1:1/walrelay?sslmode=disable"}, "connect to postgres"},
		{"missing table", []string{"--table", "public.no_such_table_" + f.ID}, "does not exist"},
		{"unknown broker", []string{"--kafka-brokers", "127.0.0.1:1"}, "kafka"},
		{"missing slot", []string{"--slot", "no_such_slot_" + f.ID}, "walrelay init"},
		{"hostile slot name", []string{"--slot", `x"; DROP TABLE t; --`}, "slot name"},
		{"hostile table name", []string{"--table", `public.x; DROP`}, "table name"},
		{"wal_level not logical", []string{"--postgres-url", replicaLevelServer(t)}, "wal_level"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, stderr, code := f.Walrelay("run", tc.args...)
			took := time.Since(start)
			if code == 0 {
				t.Fatalf("exit code 0; want non-zero\n%s", stderr)
			}
			line := lastLine(stderr)
			if !strings.HasPrefix(line, "walrelay: ") || !strings.Contains(strings.ToLower(line), strings.ToLower(tc.want)) {
				t.Fatalf("last line of stderr = %q; want `walrelay: ...%s...`\n%s", line, tc.want, stderr)
			}
			if strings.Count(stderr, "\nwalrelay: ")+boolInt(strings.HasPrefix(stderr, "walrelay: ")) != 1 {
				t.Errorf("want exactly one error line, got:\n%s", stderr)
			}
			if strings.Contains(line, "walrelay:walrelay@") {
				t.Errorf("the error line shows the password: %q", line)
			}
			t.Logf("failed in %s with: %s", took.Round(time.Millisecond), line)
			if took > 30*time.Second {
				t.Errorf("took %s to fail; want under 30s", took)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// replicaLevelServer starts a throwaway PostgreSQL with wal_level=replica
// and returns its URL.
func replicaLevelServer(t *testing.T) string {
	t.Helper()
	bin := "/usr/lib/postgresql/15/bin"
	dir, err := os.MkdirTemp("", "walrelay-replica-")
	harness.Must(t, err, "temp dir")
	t.Cleanup(func() { os.RemoveAll(dir) })
	asOwner := func(name string, args ...string) *exec.Cmd { return exec.Command(filepath.Join(bin, name), args...) }
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as the postgres user.
		u, err := user.Lookup("postgres")
		harness.Must(t, err, "look up the postgres user")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		harness.Must(t, os.Chown(dir, uid, gid), "chown %s", dir)
		asOwner = func(name string, args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := asOwner("initdb", "-D", data, "-U", "walrelay", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := strings.TrimPrefix(harness.FreePort(t), "127.0.0.1:")
	opts := "-c listen_addresses=127.0.0.1 -c wal_level=replica -c fsync=off -k " + dir + " -p " + port
	if out, err := asOwner("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start").CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
	t.Cleanup(func() { asOwner("pg_ctl", "-D", data, "-m", "immediate", "stop").Run() }) //nolint:errcheck // best effort
	return "postgres://walrelay@127.0.0.1:" + port + "/postgres?sslmode=disable"
}
