package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// walrelay talks TLS and SASL to Kafka: one broker of the test's own
// (startSecureKafka) serves every case, each with its own fixture; the
// fixtures make and read their topics over the broker's plain listener,
// walrelay gets only the secured one.
func TestKafkaSecurity(t *testing.T) {
	k := startSecureKafka(t)
	t.Run("SCRAM-SHA-512 over SASL_SSL publishes", func(t *testing.T) { testSCRAMPublishes(t, k) })
	t.Run("wrong password fails fast", func(t *testing.T) { testWrongPassword(t, k) })
	t.Run("untrusted certificate is refused", func(t *testing.T) { testUntrustedCertificate(t, k) })
	t.Run("PLAIN, SCRAM-SHA-256 and mutual TLS pass check", func(t *testing.T) { testCheckMechanisms(t, k) })
	t.Run("PLAIN without TLS publishes and warns", func(t *testing.T) { testPlainWithoutTLS(t, k) })
	t.Run("password changed while running is retried, not parked", func(t *testing.T) { testPasswordChangedWhileRunning(t, k) })
	t.Run("a principal that may not read publishes, check warns", func(t *testing.T) { testReadlessPrincipal(t, k) })
}

// A principal allowed to write the topics but not to read them: walrelay
// publishes every row all the same; walrelay check warns that a restart
// cannot see what the partitions hold, and a restarted relay warns that
// it cannot read the partitions' ends (--resume-from-kafka then only
// costs duplicates).
func testReadlessPrincipal(t *testing.T, k *secureKafka) {
	f := harness.NewOn(t, k.plain, "order")
	k.allow(t, "User:"+readlessUser, f.TopicPrefix, kafka.ACLOperationTypeWrite, kafka.ACLOperationTypeDescribe,
		kafka.ACLOperationTypeCreate, kafka.ACLOperationTypeDescribeConfigs)
	args := append(k.tlsArgs(), "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", readlessUser, "--kafka-sasl-password", readlessPassword)
	f.WalrelayOK("init")
	total := 0
	for run := range 2 {
		r := f.Run(args...)
		r.WaitStarted()
		n, err := f.Write(context.Background(), harness.Load{Writers: 2, Rows: 200, MaxTxRows: 10, AggregatesPerWriter: 5, Types: []string{"order"}})
		testkit.Must(t, err, "write outbox rows")
		total += n
		f.WaitConfirmed(r, f.CurrentLSN(), 2*time.Minute)
		if code := r.Stop(); code != 0 {
			t.Fatalf("walrelay exit code after SIGTERM: got %d; want 0\n%s", code, r.Stderr.String())
		}
		if run == 0 {
			// The partitions were empty: nothing to read yet.
			continue
		}
		line := r.WaitLine("cannot read the partition's end in Kafka", time.Second)
		if !strings.Contains(line, "Topic Authorization Failed") {
			t.Errorf("the warning of a partition whose end cannot be read: %s; want the broker's refusal in it", line)
		}
	}

	stdout, stderr, _ := f.Walrelay("check", args...)
	topic := f.Topic("order")
	row := ""
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, "topic "+topic+" read") {
			row = l
		}
	}
	if !strings.HasPrefix(row, "warn") || !strings.Contains(row, "may not read it") || !strings.Contains(row, "Topic Authorization Failed") {
		t.Errorf("check's row of reading %s: %q; want a warning that walrelay may not read it\n%s%s", topic, row, stdout, stderr)
	}
	rows := f.OutboxRows()
	if len(rows) != total {
		t.Fatalf("outbox rows: got %d; want the %d committed", len(rows), total)
	}
	harness.AssertClean(t, f.Verify(rows), 0)
}

// tlsArgs trust the broker's CA; scramArgs add SCRAM-SHA-512 as walrelay.
func (k *secureKafka) tlsArgs() []string {
	return []string{"--kafka-brokers", k.saslSSL, "--kafka-tls-ca-file", k.ca.File()}
}

func scramArgs(password string) []string {
	return []string{"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", kafkaUser, "--kafka-sasl-password", password}
}

// The relay publishes with SCRAM-SHA-512 and the CA file, the password read
// from a file with a trailing newline; every row arrives, in order, and
// nothing warns about clear text.
func testSCRAMPublishes(t *testing.T, k *secureKafka) {
	f := harness.NewOn(t, k.plain, "order", "customer")
	pwFile := filepath.Join(t.TempDir(), "kafka-password")
	testkit.Must(t, os.WriteFile(pwFile, []byte(scram512Password+"\n"), 0o600), "write the password file")
	args := append(k.tlsArgs(), "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", kafkaUser,
		"--kafka-sasl-password-file", pwFile)
	r := f.Start(args...)
	r.WaitStarted()

	n, err := f.Write(context.Background(), harness.Load{Writers: 2, Rows: 600, MaxTxRows: 20, AggregatesPerWriter: 5, Types: []string{"order", "customer"}})
	testkit.Must(t, err, "write outbox rows")
	took := f.WaitConfirmed(r, f.CurrentLSN(), 2*time.Minute)
	t.Logf("%d rows confirmed %s after the last commit", n, took.Round(time.Millisecond))
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay exit code after SIGTERM: got %d; want 0\n%s", code, r.Stderr.String())
	}
	out := r.Stderr.String()
	for _, want := range []string{`"kafka_tls":true`, `"kafka_sasl":"SCRAM-SHA-512"`} {
		if !strings.Contains(out, want) {
			t.Errorf("start-up log: got no %s; want it", want)
		}
	}
	for _, unwanted := range []string{"clear text", "unencrypted", scram512Password} {
		if strings.Contains(out, unwanted) {
			t.Errorf("walrelay's output: got %q; want it absent under TLS\n%s", unwanted, out)
		}
	}
	rows := f.OutboxRows()
	if len(rows) != n {
		t.Fatalf("outbox rows: got %d; want the %d committed", len(rows), n)
	}
	harness.AssertClean(t, f.Verify(rows), 0)
}

// A wrong password ends `walrelay run` at its start, in seconds, with one
// line that says SASL authentication failed and never shows the password.
func testWrongPassword(t *testing.T, k *secureKafka) {
	f := harness.NewOn(t, k.plain, "order")
	f.WalrelayOK("init")
	const wrong = "not-the-Pa55word-4711"
	for _, mech := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"} {
		t.Run(mech, func(t *testing.T) {
			args := append(k.tlsArgs(), "--kafka-sasl-mechanism", mech, "--kafka-sasl-username", kafkaUser, "--kafka-sasl-password", wrong)
			line, stderr := wantRunFails(t, f, 15*time.Second, args...)
			for _, want := range []string{"kafka brokers " + k.saslSSL + " refused the SASL authentication", "SASL Authentication Failed"} {
				if !strings.Contains(line, want) {
					t.Errorf("error line: got %q; want it to contain %q", line, want)
				}
			}
			if strings.Contains(stderr, wrong) {
				t.Errorf("walrelay's output shows the password:\n%s", stderr)
			}
		})
	}
}

// A broker certificate walrelay cannot trust (another CA, the system's
// roots, another name) fails the start with a certificate error.
func testUntrustedCertificate(t *testing.T, k *secureKafka) {
	f := harness.NewOn(t, k.plain, "order")
	f.WalrelayOK("init")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"another CA", []string{"--kafka-brokers", k.saslSSL, "--kafka-tls-ca-file", testkit.NewCA(t).File()}, "certificate signed by unknown authority"},
		{"system roots", []string{"--kafka-brokers", k.saslSSL, "--kafka-tls"}, "certificate signed by unknown authority"},
		{"another name", append(k.tlsArgs(), "--kafka-tls-server-name", "kafka.invalid"), "kafka.invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line, stderr := wantRunFails(t, f, 15*time.Second, append(tc.args, scramArgs(scram512Password)...)...)
			for _, want := range []string{"TLS handshake with kafka brokers " + k.saslSSL + " failed", tc.want} {
				if !strings.Contains(line, want) {
					t.Errorf("error line: got %q; want it to contain %q", line, want)
				}
			}
			if strings.Contains(stderr, scram512Password) {
				t.Errorf("walrelay's output shows the password:\n%s", stderr)
			}
		})
	}
}

// wantRunFails runs `walrelay run` and wants it to exit 1 within the bound
// with one error line, which it returns with the whole stderr.
func wantRunFails(t *testing.T, f *harness.Fixture, within time.Duration, args ...string) (line, stderr string) {
	t.Helper()
	start := time.Now()
	_, stderr, code := f.Walrelay("run", args...)
	took := time.Since(start)
	line = lastLine(stderr)
	t.Logf("exit %d after %s: %s", code, took.Round(time.Millisecond), line)
	if code != 1 {
		t.Errorf("exit code: got %d; want 1\n%s", code, stderr)
	}
	if !strings.HasPrefix(line, "walrelay: ") || strings.Count("\n"+stderr, "\nwalrelay: ") != 1 {
		t.Errorf("stderr: got\n%s\nwant one last line `walrelay: <reason>`", stderr)
	}
	if took > within {
		t.Errorf("took %s to fail; want under %s", took, within)
	}
	return line, stderr
}

// `walrelay check` reaches the broker with PLAIN and SCRAM-SHA-256 over
// SASL_SSL, with a server name that is not the broker's host, and with a
// client certificate on the listener that requires one; without that
// certificate, or with a wrong password, it fails "kafka reachable" and
// the fix names the flags to look at.
func testCheckMechanisms(t *testing.T, k *secureKafka) {
	f := harness.NewOn(t, k.plain, "order")
	f.WalrelayOK("init")
	// Rows, so that the check knows the topic and reads its settings too.
	_, err := f.Write(context.Background(), harness.Load{Writers: 1, Rows: 10, MaxTxRows: 5, AggregatesPerWriter: 2, Types: []string{"order"}})
	testkit.Must(t, err, "write outbox rows")
	clientCert, clientKey := k.ca.Issue(t, "walrelay-client")
	sasl := func(mech, password string) []string {
		return append(k.tlsArgs(), "--kafka-sasl-mechanism", mech, "--kafka-sasl-username", kafkaUser, "--kafka-sasl-password", password)
	}
	mTLS := []string{"--kafka-brokers", k.mTLS, "--kafka-tls-ca-file", k.ca.File()}
	cases := []struct {
		name    string
		args    []string
		status  string
		fixHint string // in the fix of a failure
	}{
		{"PLAIN", sasl("plain", plainPassword), "ok", ""},
		{"SCRAM-SHA-256", sasl("SCRAM-SHA-256", scram256Password), "ok", ""},
		{"server name localhost", append(sasl("SCRAM-SHA-512", scram512Password), "--kafka-tls-server-name", "localhost"), "ok", ""},
		{"client certificate", append(mTLS, "--kafka-tls-cert-file", clientCert, "--kafka-tls-key-file", clientKey), "ok", ""},
		{"no client certificate", mTLS, "fail", "--kafka-tls-cert-file"},
		{"SCRAM-SHA-256 with the SCRAM-SHA-512 password", sasl("SCRAM-SHA-256", scram512Password), "fail", "--kafka-sasl-mechanism"},
		// Settings of another listener: the broker closes the connection.
		{"no TLS towards SASL_SSL", append([]string{"--kafka-brokers", k.saslSSL}, scramArgs(scram512Password)...), "fail", "TLS and SASL settings"},
		{"no SASL towards SASL_SSL", k.tlsArgs(), "fail", "TLS and SASL settings"},
		{"TLS towards SASL_PLAINTEXT", append([]string{"--kafka-brokers", k.saslPlain, "--kafka-tls-ca-file", k.ca.File()}, scramArgs(scram512Password)...), "fail", "TLS and SASL settings"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := f.Walrelay("check", append(tc.args, "--json")...)
			var report checkJSON
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatalf("check --json: got %v parsing\n%s\n%s; want a JSON report", err, out, stderr)
			}
			var found, fix string
			for _, c := range report.Checks {
				if c.Name == "kafka reachable" {
					found, fix = c.Found, c.Fix
				}
			}
			t.Logf("exit %d; kafka reachable: %s: %s", code, report.status("kafka reachable"), found)
			if got := report.status("kafka reachable"); got != tc.status {
				t.Fatalf("kafka reachable: got %s (%s); want %s", got, found, tc.status)
			}
			if tc.status == "ok" {
				wantStatus(t, report, map[string]string{"kafka tls": "ok", "topic " + f.Topic("order"): "ok"})
			} else if !strings.Contains(fix, tc.fixHint) || code != 1 {
				t.Errorf("exit %d, fix %q; want exit 1 and a fix naming %s", code, fix, tc.fixHint)
			}
			for _, secret := range []string{plainPassword, scram256Password, scram512Password} {
				if strings.Contains(out+stderr, secret) {
					t.Errorf("walrelay check's output shows a password:\n%s%s", out, stderr)
				}
			}
		})
	}
}

// PLAIN over SASL_PLAINTEXT publishes too, and walrelay warns at start that
// the credentials travel in clear text.
func testPlainWithoutTLS(t *testing.T, k *secureKafka) {
	f := harness.NewOn(t, k.plain, "order")
	r := f.Start("--kafka-brokers", k.saslPlain, "--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", kafkaUser,
		"--kafka-sasl-password", plainPassword)
	r.WaitStarted()
	n, err := f.Write(context.Background(), harness.Load{Writers: 1, Rows: 50, MaxTxRows: 5, AggregatesPerWriter: 3, Types: []string{"order"}})
	testkit.Must(t, err, "write outbox rows")
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay exit code after SIGTERM: got %d; want 0\n%s", code, r.Stderr.String())
	}
	out := r.Stderr.String()
	var warned bool
	for _, l := range strings.Split(out, "\n") {
		warned = warned || strings.Contains(l, `"level":"warn"`) && strings.Contains(l, "SASL credentials travel in clear text")
	}
	if !warned {
		t.Errorf("walrelay's log: got no warning that the SASL credentials travel in clear text\n%s", out)
	}
	if strings.Contains(out, plainPassword) {
		t.Errorf("walrelay's output shows the password:\n%s", out)
	}
	rows := f.OutboxRows()
	if len(rows) != n {
		t.Fatalf("outbox rows: got %d; want the %d committed", len(rows), n)
	}
	harness.AssertClean(t, f.Verify(rows), 0)
}

// A password that stops working while walrelay runs (changed on the
// brokers first, say) is retried, and every attempt logged with Kafka's
// SASL error; it is never taken for a refused message: nothing is parked,
// nothing is confirmed past what Kafka has, and the relay goes on by itself
// once the brokers accept the password again.
func testPasswordChangedWhileRunning(t *testing.T, k *secureKafka) {
	const user, good, changed = "walrelay-rotating", "rotating-Pa55word-1", "rotating-Pa55word-2"
	k.setSCRAM256(t, user, good)
	f := harness.NewOn(t, k.plain, "order")
	r := f.Start("--kafka-brokers", k.saslPlain, "--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-sasl-username", user,
		"--kafka-sasl-password", good, "--kafka-retry-backoff-max", "1s")
	r.WaitStarted()
	ctx := context.Background()
	load := harness.Load{Writers: 1, Rows: 20, MaxTxRows: 5, AggregatesPerWriter: 3, Types: []string{"order"}}
	_, err := f.Write(ctx, load)
	testkit.Must(t, err, "write outbox rows")
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)

	k.setSCRAM256(t, user, changed)
	time.Sleep(3 * time.Second) // past the 2s session of walrelay's connections
	_, err = f.Write(ctx, load)
	testkit.Must(t, err, "write outbox rows")
	end := f.CurrentLSN()
	poll.EventuallyEvery(t, 30*time.Second, 100*time.Millisecond, "a retried produce with SASL Authentication Failed in walrelay's log", func() (string, bool) {
		log := r.Stderr.String()
		if retriedAuthentication(log) {
			return "", true
		}
		r.Running()
		return "walrelay's log:\n" + log, false
	})
	time.Sleep(2 * time.Second) // a few more attempts
	if got := f.ConfirmedLSN(); got >= end {
		t.Errorf("slot confirmed %s while Kafka refused walrelay; want below %s", got, end)
	}
	wantNoDeadLetters(t, f)

	k.setSCRAM256(t, user, good)
	took := f.WaitConfirmed(r, end, time.Minute)
	t.Logf("published %s after the password was restored", took.Round(time.Millisecond))
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay exit code after SIGTERM: got %d; want 0\n%s", code, r.Stderr.String())
	}
	wantNoDeadLetters(t, f)
	rows := f.OutboxRows()
	// At least once: a request the broker cut off may have been written.
	harness.AssertClean(t, f.Verify(rows), load.Rows)
	if strings.Contains(r.Stderr.String(), good) || strings.Contains(r.Stderr.String(), changed) {
		t.Errorf("walrelay's output shows a password:\n%s", r.Stderr.String())
	}
}

// retriedAuthentication reports a log line of a produce retried after the
// broker refused the SASL authentication.
func retriedAuthentication(log string) bool {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"level":"warn"`) && strings.Contains(l, "produce failed, retrying the batch") &&
			strings.Contains(l, "SASL Authentication Failed") && strings.Contains(l, `"class":"transient"`) {
			return true
		}
	}
	return false
}

func wantNoDeadLetters(t *testing.T, f *harness.Fixture) {
	t.Helper()
	var n int
	err := f.DB.QueryRow(context.Background(), "SELECT count(*) FROM "+f.Table+"_dead_letters").Scan(&n)
	testkit.Must(t, err, "count dead letters")
	if n != 0 {
		t.Errorf("dead letters: got %d; want none (an authentication failure is no bad message)", n)
	}
}
