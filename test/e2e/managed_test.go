package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/pgserver"
)

// An RDS-shaped role set-up on plain PostgreSQL (issue 34): on RDS and
// Aurora the right to replicate is membership of rds_replication, and the
// role's REPLICATION attribute stays false. check judges by a real
// replication connection: here the server refuses it (plain PostgreSQL
// grants nothing through that role), and check shows the server's error
// and the RDS way to fix it, never ALTER ROLE ... REPLICATION, which an
// RDS user cannot run. A private server: the rds_ roles are cluster-wide
// and would change other tests' fixes on the rig's.
func TestCheckNamesTheRDSWayForAnRDSShapedRole(t *testing.T) {
	t.Parallel()
	s := pgserver.Start(t, nil)
	s.Exec(t, `CREATE ROLE rds_superuser NOLOGIN`)
	s.Exec(t, `CREATE ROLE rds_replication NOLOGIN`)
	s.Exec(t, `CREATE ROLE app_relay LOGIN IN ROLE rds_replication`)
	url := fmt.Sprintf("postgres://app_relay@127.0.0.1:%d/walrelay?sslmode=disable", s.Port)

	cmd := exec.Command(harness.Binary, "check", "--json", "--postgres-url", url, "--kafka-brokers", os.Getenv("WALRELAY_TEST_KAFKA_BROKERS"))
	cmd.Env = []string{}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("walrelay check (%v):\n%s%s", err, stdout.String(), stderr.String())
	var report checkJSON
	if jerr := json.Unmarshal(stdout.Bytes(), &report); jerr != nil {
		t.Fatalf("check --json: %v parsing\n%s; want a JSON report", jerr, stdout.String())
	}
	if err == nil || !report.Failed {
		t.Errorf("check passed for a role the server does not let replicate; want it failed")
	}
	if p := findCheck(report, "postgres provider"); p.Status != "ok" || p.Found != "Amazon RDS (role rds_superuser)" {
		t.Errorf("postgres provider: %+v; want Amazon RDS, named by its role rds_superuser", p)
	}
	if h := findCheck(report, "provider slots"); h.Status != "warn" || !strings.Contains(h.Found, "major version upgrade") {
		t.Errorf("provider slots: %+v; want the RDS upgrade warning", h)
	}
	c := findCheck(report, "role replication")
	for _, want := range []string{"cannot open a replication connection", "member of rds_replication", "SQLSTATE 42501"} {
		if !strings.Contains(c.Found, want) {
			t.Errorf("role replication found %q; want it to say %q", c.Found, want)
		}
	}
	if c.Status != "fail" || !strings.Contains(c.Fix, "rds.logical_replication = 1") {
		t.Errorf("role replication: %+v; want a failure whose fix is the parameter group's rds.logical_replication", c)
	}
	if strings.Contains(stdout.String()+stderr.String(), "ALTER ROLE") {
		t.Errorf("check tells an RDS user to ALTER ROLE, which RDS does not allow:\n%s", stdout.String())
	}
}
