package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// The PostgreSQL half of walrelay's transport security: walrelay reaches the
// rig's server over verified TLS as walrelay_tls, a role the server admits
// only over TLS and with its password (scripts/pg.sh's pg_hba.conf), with
// the password from --postgres-password-file; what cannot be verified is
// refused; the password shows in no output.

// tlsRole is the role pg_hba.conf admits only over TLS, by password.
const tlsRole = "walrelay_tls"

// pgTLS is the rig's server with TLS on, for one test, and how to reach it
// as tlsRole.
type pgTLS struct {
	ca, otherCA  *testkit.CA // ca signed the server's certificate; otherCA did not
	password     string      // tlsRole's, with characters that need escaping
	secret       string      // the random part of password, looked for in output
	passwordFile string      // password and a line break
	url          string      // tlsRole at 127.0.0.1, no password, no TLS settings
}

// verifyFull are the flags that reach the server as it should be reached.
func (s *pgTLS) verifyFull() []string {
	return []string{"--postgres-url", s.url, "--postgres-sslmode", "verify-full",
		"--postgres-sslrootcert", s.ca.File(), "--postgres-password-file", s.passwordFile}
}

// noPassword fails the test if any output holds the password.
func (s *pgTLS) noPassword(t *testing.T, what string, outputs ...string) {
	t.Helper()
	for _, out := range outputs {
		if strings.Contains(out, s.secret) {
			t.Errorf("%s printed the password:\n%s", what, out)
		}
	}
}

// The relay streams over verify-full TLS as a role that can come in no
// other way, with the password from its file; it warns of nothing; every
// one of its sessions is encrypted; check and status work the same way; no
// output holds the password.
func TestPostgresTLSVerifyFullStreams(t *testing.T) {
	f := harness.New(t, "order", "customer")
	f.WalrelayOK("init")
	s := enablePostgresTLS(t, f)

	// Heartbeats every second, so that they too are written as the role.
	metrics := testkit.FreePort(t)
	r := f.Run(append(s.verifyFull(), "--heartbeat-interval", "1s", "--metrics-addr", metrics)...)
	r.WaitStarted()
	n, err := f.Write(context.Background(), harness.Load{Writers: 2, Rows: 300, MaxTxRows: 10, AggregatesPerWriter: 5, Types: []string{"order", "customer"}})
	testkit.Must(t, err, "write outbox rows")
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	waitMetric(t, metrics, "walrelay_heartbeats_received_total", func(v float64) bool { return v >= 2 }, 15*time.Second)
	encrypted, plain, walsenders := sessionsOf(t, f, tlsRole)
	if plain != 0 || encrypted < 2 || walsenders != 1 {
		t.Errorf("sessions of %s: got %d encrypted (%d of them walsenders), %d plain; want the replication session and the others, all encrypted",
			tlsRole, encrypted, walsenders, plain)
	}
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay exit code after SIGTERM = %d; want 0\n%s", code, r.Stderr.String())
	}
	rows := f.OutboxRows()
	if len(rows) != n {
		t.Fatalf("outbox holds %d rows; the writers committed %d", len(rows), n)
	}
	harness.AssertClean(t, f.Verify(rows), 0)
	stderr := r.Stderr.String()
	if strings.Contains(stderr, "not verified TLS") || strings.Contains(stderr, "postgres_tls") {
		t.Errorf("run under verify-full logged a TLS warning; want none:\n%s", stderr)
	}
	if strings.Contains(stderr, `"level":"error"`) {
		t.Errorf("run as %s logged errors; want none (a missing privilege?):\n%s", tlsRole, stderr)
	}
	s.noPassword(t, "walrelay run", stderr)

	stdout, errOut, code := f.Walrelay("check", append(s.verifyFull(), "--json")...)
	s.noPassword(t, "walrelay check --json", stdout, errOut)
	report := parseCheck(t, stdout)
	wantStatus(t, report, map[string]string{"postgres reachable": "ok", "postgres tls": "ok", "role replication": "ok"})
	if code != 0 || report.Fail != 0 {
		t.Errorf("check as %s over verify-full: got exit %d, %d failed; want 0, none\n%s%s", tlsRole, code, report.Fail, stdout, errOut)
	}
	stdout, errOut, code = f.Walrelay("status", append(s.verifyFull(), "--json")...)
	s.noPassword(t, "walrelay status --json", stdout, errOut)
	if code != 0 || !strings.Contains(stdout, f.Slot) {
		t.Errorf("status as %s over verify-full: got exit %d; want 0 and the slot\n%s%s", tlsRole, code, stdout, errOut)
	}
}

// A server whose certificate the CA did not sign, a host name the
// certificate does not hold, a connection without TLS and a wrong password
// are each refused at start, with the reason on the error line and without
// the password.
func TestPostgresTLSRefusesWhatItCannotVerify(t *testing.T) {
	f := harness.New(t)
	f.WalrelayOK("init")
	s := enablePostgresTLS(t, f)
	localhost := strings.Replace(s.url, "@127.0.0.1:", "@localhost:", 1)
	wrongPassword := filepath.Join(t.TempDir(), "wrong")
	testkit.Must(t, os.WriteFile(wrongPassword, []byte("not-"+s.password+"\n"), 0o600), "write the wrong password")
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"another CA", []string{"--postgres-sslrootcert", s.otherCA.File()}, "certificate signed by unknown authority"},
		// The certificate names 127.0.0.1 only.
		{"a host name the certificate lacks", []string{"--postgres-url", localhost}, "certificate is not valid for any names, but wanted to match localhost"},
		{"no TLS", []string{"--postgres-sslmode", "disable"}, `pg_hba.conf rejects connection for host "127.0.0.1", user "walrelay_tls"`},
		{"a wrong password", []string{"--postgres-password-file", wrongPassword}, `password authentication failed for user "walrelay_tls"`},
	} {
		start := time.Now()
		stdout, stderr, code := f.Walrelay("run", append(s.verifyFull(), tc.flags...)...)
		t.Logf("%s: exit %d after %s: %s", tc.name, code, time.Since(start).Round(time.Millisecond), lastLine(stderr))
		if line := lastLine(stderr); code != 1 || !strings.HasPrefix(line, "walrelay: ") || !strings.Contains(line, tc.want) {
			t.Errorf("%s: got exit %d, last line %q; want exit 1 and `walrelay: ...%s...`", tc.name, code, line, tc.want)
		}
		s.noPassword(t, "walrelay run with "+tc.name, stdout, stderr)
	}
}

// Anything less than verify-full works where the server allows it, and
// says so: one warning at the start of run, a warning in check.
func TestPostgresTLSWarnsUnlessVerifyFull(t *testing.T) {
	f := harness.New(t, "order")
	f.WalrelayOK("init")
	s := enablePostgresTLS(t, f)
	require := []string{"--postgres-url", s.url, "--postgres-sslmode", "require", "--postgres-password-file", s.passwordFile}

	r := f.Run(require...)
	r.WaitStarted()
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay exit code after SIGTERM = %d; want 0\n%s", code, r.Stderr.String())
	}
	stderr := r.Stderr.String()
	if n := strings.Count(stderr, `"msg":"the connection to PostgreSQL is not verified TLS"`); n != 1 || !strings.Contains(stderr, `"postgres_tls":"unverified"`) {
		t.Errorf("run under sslmode=require: got %d TLS warnings; want one, with postgres_tls unverified:\n%s", n, stderr)
	}
	if !strings.Contains(stderr, "sslmode=verify-full") {
		t.Errorf("run under sslmode=require: the warning lacks the fix (sslmode=verify-full):\n%s", stderr)
	}
	s.noPassword(t, "walrelay run", stderr)

	stdout, errOut, _ := f.Walrelay("check", append(require, "--json")...)
	s.noPassword(t, "walrelay check --json", stdout, errOut)
	report := parseCheck(t, stdout)
	wantStatus(t, report, map[string]string{"postgres reachable": "ok", "postgres tls": "warn"})
	for _, c := range report.Checks {
		if c.Name == "postgres tls" && (!strings.Contains(c.Found, "this connection: TLS") || !strings.Contains(c.Fix, "verify-full")) {
			t.Errorf("postgres tls: got found %q, fix %q; want the connection's TLS version and verify-full as the fix", c.Found, c.Fix)
		}
	}
}

func parseCheck(t *testing.T, out string) checkJSON {
	t.Helper()
	var report checkJSON
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("check --json: got %v parsing\n%s; want a JSON report", err, out)
	}
	return report
}

// sessionsOf counts role's server sessions that use TLS and that do not,
// and its walsenders that use TLS.
func sessionsOf(t *testing.T, f *harness.Fixture, role string) (encrypted, plain, walsenders int) {
	t.Helper()
	err := f.DB.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl),
		count(*) FILTER (WHERE s.ssl AND a.backend_type = 'walsender')
		FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.usename = $1`, role).Scan(&encrypted, &plain, &walsenders)
	testkit.Must(t, err, "read the sessions of %s", role)
	return encrypted, plain, walsenders
}

// enablePostgresTLS turns TLS on in the rig's server with a certificate
// for 127.0.0.1 from a new CA, and creates tlsRole with a new password and
// the privileges the relay needs on f's tables. t.Cleanup drops the role
// and turns TLS off again.
func enablePostgresTLS(t *testing.T, f *harness.Fixture) *pgTLS {
	t.Helper()
	requireTLSRoleRules(t, f)
	s := &pgTLS{ca: testkit.NewCA(t), otherCA: testkit.NewCA(t)}
	cert, key := serverFiles(t, f, s.ca)

	exec := func(sql string) {
		t.Helper()
		_, err := f.DB.Exec(context.Background(), sql)
		testkit.Must(t, err, "%s", strings.SplitN(sql, " PASSWORD ", 2)[0])
	}
	t.Cleanup(func() {
		for _, sql := range []string{"ALTER SYSTEM RESET ssl", "ALTER SYSTEM RESET ssl_cert_file", "ALTER SYSTEM RESET ssl_key_file", "SELECT pg_reload_conf()"} {
			if _, err := f.DB.Exec(context.Background(), sql); err != nil {
				t.Errorf("cleanup: %s: %v (the rig's server may be left with TLS on)", sql, err)
			}
		}
	})
	// ALTER SYSTEM runs outside a transaction: one statement per call.
	exec("ALTER SYSTEM SET ssl_cert_file = " + literal(cert))
	exec("ALTER SYSTEM SET ssl_key_file = " + literal(key))
	exec("ALTER SYSTEM SET ssl = on")
	exec("SELECT pg_reload_conf()")
	waitForTLS(t, f, s.ca)

	var b [12]byte
	_, err := rand.Read(b[:])
	testkit.Must(t, err, "draw a password")
	s.secret = hex.EncodeToString(b[:])
	s.password = `p@ss:w/rd?&=%20'q'\` + s.secret
	s.passwordFile = filepath.Join(t.TempDir(), "pgpassword")
	testkit.Must(t, os.WriteFile(s.passwordFile, []byte(s.password+"\n"), 0o600), "write the password file")
	t.Cleanup(func() {
		for _, sql := range []string{"DROP OWNED BY " + tlsRole, "DROP ROLE " + tlsRole} {
			if _, err := f.DB.Exec(context.Background(), sql); err != nil {
				t.Errorf("cleanup: %s: %v", sql, err)
			}
		}
	})
	exec(`DO $$ BEGIN
		IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '` + tlsRole + `') THEN
			ALTER ROLE ` + tlsRole + ` LOGIN REPLICATION NOSUPERUSER PASSWORD ` + literal(s.password) + `;
		ELSE
			CREATE ROLE ` + tlsRole + ` LOGIN REPLICATION PASSWORD ` + literal(s.password) + `;
		END IF; END $$`)
	// Least privilege for the relay: the harness's tables belong to the
	// superuser, who created them and the publication.
	exec("GRANT USAGE ON SCHEMA public TO " + tlsRole)
	exec("GRANT SELECT ON " + f.Table + " TO " + tlsRole)
	exec("GRANT SELECT, INSERT, UPDATE, DELETE ON " + f.Table + "_dead_letters TO " + tlsRole)
	exec("GRANT SELECT, INSERT, UPDATE, DELETE ON " + f.Table + "_recoveries TO " + tlsRole)
	exec("GRANT SELECT, INSERT, UPDATE ON " + f.Table + "_topics TO " + tlsRole)

	u, err := url.Parse(f.PGURL)
	testkit.Must(t, err, "parse the rig's URL")
	u.User, u.RawQuery = url.User(tlsRole), ""
	s.url = u.String()
	return s
}

// requireTLSRoleRules fails the test unless the server's pg_hba.conf has
// the tlsRole rules of scripts/pg.sh, which the refusals test depends on.
func requireTLSRoleRules(t *testing.T, f *harness.Fixture) {
	t.Helper()
	var rules []string
	err := f.DB.QueryRow(context.Background(), `SELECT coalesce(array_agg(type || ' ' || array_to_string(database, ',') || ' ' || auth_method ORDER BY line_number), '{}')
		FROM pg_hba_file_rules WHERE $1 = ANY(user_name)`, tlsRole).Scan(&rules)
	testkit.Must(t, err, "read pg_hba_file_rules")
	want := "hostssl all scram-sha-256|hostssl replication scram-sha-256|host all reject|host replication reject"
	if got := strings.Join(rules, "|"); got != want {
		t.Fatalf("pg_hba.conf rules for %s: got %q; want %q: restart the rig with this tree's scripts/pg.sh, which writes them", tlsRole, got, want)
	}
}

// serverFiles issues the server's certificate for 127.0.0.1 from ca and
// copies it and its key into a new folder under /tmp that the server's OS
// user can read (t.TempDir and $TMPDIR may sit in a folder only the test's
// user can enter); the key is the server user's own, mode 0600, as
// PostgreSQL demands. The folder is removed in t.Cleanup.
func serverFiles(t *testing.T, f *harness.Fixture, ca *testkit.CA) (cert, key string) {
	t.Helper()
	var dataDir string
	err := f.DB.QueryRow(context.Background(), "SELECT current_setting('data_directory')").Scan(&dataDir)
	testkit.Must(t, err, "read the server's data_directory")
	st, err := os.Stat(dataDir)
	testkit.Must(t, err, "stat the server's data directory (the test runs on the server's machine)")
	uid, gid := int(st.Sys().(*syscall.Stat_t).Uid), int(st.Sys().(*syscall.Stat_t).Gid)
	root := os.Geteuid() == 0
	if !root && os.Geteuid() != uid {
		t.Fatalf("the server runs as uid %d and the test as uid %d; want root or the server's user, to hand the server its key", uid, os.Geteuid())
	}
	dir, err := os.MkdirTemp("/tmp", "walrelay-pgtls-")
	testkit.Must(t, err, "make a folder for the server's certificate")
	t.Cleanup(func() { os.RemoveAll(dir) })
	testkit.Must(t, os.Chmod(dir, 0o755), "chmod %s", dir)
	issuedCert, issuedKey := ca.Issue(t, "walrelay test server", "127.0.0.1")
	cert, key = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	for _, c := range []struct {
		from, to string
		mode     os.FileMode
	}{{issuedCert, cert, 0o644}, {issuedKey, key, 0o600}} {
		b, err := os.ReadFile(c.from)
		testkit.Must(t, err, "read %s", c.from)
		testkit.Must(t, os.WriteFile(c.to, b, c.mode), "write %s", c.to)
		if root {
			testkit.Must(t, os.Chown(c.to, uid, gid), "chown %s to the server's user", c.to)
		}
	}
	return cert, key
}

// waitForTLS waits until the server accepts a connection verified against
// ca: the postmaster loads the new certificate when it handles the reload.
func waitForTLS(t *testing.T, f *harness.Fixture, ca *testkit.CA) {
	t.Helper()
	u, err := url.Parse(f.PGURL)
	testkit.Must(t, err, "parse the rig's URL")
	q := u.Query()
	q.Set("sslmode", "verify-full")
	q.Set("sslrootcert", ca.File())
	u.RawQuery = q.Encode()
	poll.EventuallyEvery(t, 20*time.Second, 100*time.Millisecond, "a verified TLS connection after the reload", func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgconn.Connect(ctx, u.String())
		if err != nil {
			return fmt.Sprintf("%v (the server's log, WALRELAY_TEST_PG_LOG, says why)", err), false
		}
		conn.Close(context.Background())
		return "", true
	})
}

// literal quotes s as an SQL string literal (standard_conforming_strings
// is on: a backslash is an ordinary character).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
