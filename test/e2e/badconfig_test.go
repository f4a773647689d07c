package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/pgserver"
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
		// A legal name, quoted: looked up as a name, and missing.
		{"hostile table name", []string{"--table", `public.x; DROP`}, `public."x; DROP" does not exist`},
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

// replicaLevelServer starts a throwaway PostgreSQL of the rig's version
// with wal_level=replica and returns its URL.
func replicaLevelServer(t *testing.T) string {
	t.Helper()
	return pgserver.Start(t, pgserver.Settings{"wal_level = replica"}).URL("postgres")
}
