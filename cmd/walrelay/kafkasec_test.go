package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/walrelay/walrelay/internal/testkit"
)

const testPassword = "s3cret-Pa55word"

// writeFile writes content into a new file of the test and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every wrong combination of the TLS and SASL flags is an error that names
// the flag, and none shows the password.
func TestKafkaSecurityRefusesBadFlags(t *testing.T) {
	ca := testkit.NewCA(t)
	cert, key := ca.Issue(t, "walrelay")
	_, otherKey := ca.Issue(t, "other")
	scram := func(o kafkaSecurityOptions) kafkaSecurityOptions {
		o.KafkaSASLMechanism, o.KafkaSASLUsername = "SCRAM-SHA-512", "walrelay"
		return o
	}
	tests := []struct {
		name string
		o    kafkaSecurityOptions
		want string
	}{
		{"missing CA file", kafkaSecurityOptions{KafkaTLSCAFile: filepath.Join(t.TempDir(), "nope.pem")}, "--kafka-tls-ca-file: open "},
		{"CA file without PEM", kafkaSecurityOptions{KafkaTLSCAFile: writeFile(t, "ca.pem", "not a certificate\n")}, "holds no PEM certificate"},
		{"CA file holding a key", kafkaSecurityOptions{KafkaTLSCAFile: key}, "PEM block 1 is a PRIVATE KEY, not a CERTIFICATE"},
		{"CA file with a broken certificate", kafkaSecurityOptions{KafkaTLSCAFile: writeFile(t, "bad.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")}, "--kafka-tls-ca-file: "},
		{"certificate without key", kafkaSecurityOptions{KafkaTLSCertFile: cert}, "--kafka-tls-cert-file and --kafka-tls-key-file go together"},
		{"key without certificate", kafkaSecurityOptions{KafkaTLSKeyFile: key}, "--kafka-tls-cert-file and --kafka-tls-key-file go together"},
		{"key of another certificate", kafkaSecurityOptions{KafkaTLSCertFile: cert, KafkaTLSKeyFile: otherKey}, "--kafka-tls-cert-file " + cert + " with --kafka-tls-key-file"},
		{"server name without TLS", kafkaSecurityOptions{KafkaTLSServerName: "kafka.example"}, "--kafka-tls-server-name is set but TLS is off"},
		{"unknown mechanism", kafkaSecurityOptions{KafkaSASLMechanism: "GSSAPI", KafkaSASLUsername: "u", KafkaSASLPassword: testPassword}, `--kafka-sasl-mechanism (WALRELAY_KAFKA_SASL_MECHANISM) is "GSSAPI"; want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
		{"mechanism without user", kafkaSecurityOptions{KafkaSASLMechanism: "PLAIN", KafkaSASLPassword: testPassword}, "--kafka-sasl-mechanism PLAIN needs --kafka-sasl-username and a password"},
		{"mechanism without password", scram(kafkaSecurityOptions{}), "--kafka-sasl-mechanism SCRAM-SHA-512 needs --kafka-sasl-username and a password"},
		{"user without mechanism", kafkaSecurityOptions{KafkaSASLUsername: "walrelay"}, "--kafka-sasl-mechanism is empty"},
		{"password without mechanism", kafkaSecurityOptions{KafkaSASLPassword: testPassword}, "--kafka-sasl-mechanism is empty"},
		{"password file without mechanism", kafkaSecurityOptions{KafkaSASLPasswordFile: writeFile(t, "pw", testPassword)}, "--kafka-sasl-mechanism is empty"},
		{"password and password file", scram(kafkaSecurityOptions{KafkaSASLPassword: testPassword, KafkaSASLPasswordFile: writeFile(t, "pw", testPassword)}), "both --kafka-sasl-password (or WALRELAY_KAFKA_SASL_PASSWORD) and --kafka-sasl-password-file are set"},
		{"missing password file", scram(kafkaSecurityOptions{KafkaSASLPasswordFile: filepath.Join(t.TempDir(), "pw")}), "--kafka-sasl-password-file (WALRELAY_KAFKA_SASL_PASSWORD_FILE): open "},
		{"empty password file", scram(kafkaSecurityOptions{KafkaSASLPasswordFile: writeFile(t, "pw", "\n")}), "holds no password"},
		// The SCRAM library's own error would quote the password.
		{"password SCRAM refuses", scram(kafkaSecurityOptions{KafkaSASLPassword: testPassword + "\x07"}), "has characters SCRAM does not allow"},
	}
	for _, tt := range tests {
		tc, mech, err := tt.o.kafkaSecurity()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, %v, %v; want an error containing %q", tt.name, tc, mech, err, tt.want)
			continue
		}
		if tc != nil || mech != nil {
			t.Errorf("%s: got %v and %v with the error; want nil", tt.name, tc, mech)
		}
		if strings.Contains(err.Error(), testPassword) {
			t.Errorf("%s: the error %q shows the password", tt.name, err)
		}
	}
}

// TLS is off by default, on with --kafka-tls or any file, at least TLS 1.2,
// and trusts the CA file instead of the system's roots.
func TestKafkaTLSConfig(t *testing.T) {
	ca := testkit.NewCA(t)
	cert, key := ca.Issue(t, "walrelay")
	server, _ := ca.Issue(t, "broker", "kafka-1.example")
	if tc, mech, err := (kafkaSecurityOptions{}).kafkaSecurity(); tc != nil || mech != nil || err != nil {
		t.Errorf("no flags: got %v, %v, %v; want no TLS, no SASL", tc, mech, err)
	}
	tests := []struct {
		name     string
		o        kafkaSecurityOptions
		roots    bool // RootCAs is the CA file
		certs    int
		hostname string
	}{
		{"system roots", kafkaSecurityOptions{KafkaTLS: true}, false, 0, ""},
		{"CA file implies TLS", kafkaSecurityOptions{KafkaTLSCAFile: ca.File()}, true, 0, ""},
		{"client certificate implies TLS", kafkaSecurityOptions{KafkaTLSCertFile: cert, KafkaTLSKeyFile: key}, false, 1, ""},
		{"all of it", kafkaSecurityOptions{KafkaTLS: true, KafkaTLSCAFile: ca.File(), KafkaTLSCertFile: cert, KafkaTLSKeyFile: key, KafkaTLSServerName: "kafka-1.example"}, true, 1, "kafka-1.example"},
	}
	for _, tt := range tests {
		tc, err := tt.o.kafkaTLS()
		if err != nil || tc == nil {
			t.Errorf("%s: got %v, %v; want a TLS configuration", tt.name, tc, err)
			continue
		}
		if tc.MinVersion != tls.VersionTLS12 || tc.InsecureSkipVerify {
			t.Errorf("%s: MinVersion %x, InsecureSkipVerify %v; want TLS 1.2 and verification", tt.name, tc.MinVersion, tc.InsecureSkipVerify)
		}
		if (tc.RootCAs != nil) != tt.roots || len(tc.Certificates) != tt.certs || tc.ServerName != tt.hostname {
			t.Errorf("%s: RootCAs set %v, %d certificates, ServerName %q; want %v, %d, %q",
				tt.name, tc.RootCAs != nil, len(tc.Certificates), tc.ServerName, tt.roots, tt.certs, tt.hostname)
		}
		if tt.roots {
			if _, err := parseLeaf(t, server).Verify(x509.VerifyOptions{Roots: tc.RootCAs, DNSName: "kafka-1.example"}); err != nil {
				t.Errorf("%s: a broker certificate of the CA: got %v; want it trusted", tt.name, err)
			}
		}
	}
}

func parseLeaf(t *testing.T, certFile string) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair([]byte(readFile(t, certFile)), []byte(readFile(t, strings.TrimSuffix(certFile, ".crt")+".key")))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// The mechanism is case-insensitive; the password file loses one line
// ending, no more.
func TestKafkaSASLMechanism(t *testing.T) {
	tests := []struct {
		name, mechanism, password, file string
		wantName, wantPassword          string
	}{
		{"plain", "plain", testPassword, "", "PLAIN", testPassword},
		{"scram-sha-256", " scram-sha-256 ", testPassword, "", "SCRAM-SHA-256", ""},
		{"SCRAM-SHA-512", "SCRAM-SHA-512", testPassword, "", "SCRAM-SHA-512", ""},
		{"file with newline", "PLAIN", "", testPassword + "\n", "PLAIN", testPassword},
		{"file with CRLF", "PLAIN", "", testPassword + "\r\n", "PLAIN", testPassword},
		{"file with two newlines", "PLAIN", "", testPassword + "\n\n", "PLAIN", testPassword + "\n"},
		{"file without newline", "PLAIN", "", " " + testPassword, "PLAIN", " " + testPassword},
	}
	for _, tt := range tests {
		o := kafkaSecurityOptions{KafkaSASLMechanism: tt.mechanism, KafkaSASLUsername: "walrelay", KafkaSASLPassword: tt.password}
		if tt.file != "" {
			o.KafkaSASLPasswordFile = writeFile(t, "pw", tt.file)
		}
		mech, err := o.kafkaSASL()
		if err != nil || mech == nil || mech.Name() != tt.wantName {
			t.Errorf("%s: got %v, %v; want mechanism %s", tt.name, mech, err, tt.wantName)
			continue
		}
		if p, ok := mech.(plain.Mechanism); ok && (p.Password != tt.wantPassword || p.Username != "walrelay") {
			t.Errorf("%s: user %q, password %q; want walrelay, %q", tt.name, p.Username, p.Password, tt.wantPassword)
		}
	}
}

// SASL without TLS is warned about, PLAIN as clear text.
func TestKafkaSecurityWarning(t *testing.T) {
	o := kafkaSecurityOptions{KafkaSASLMechanism: "PLAIN", KafkaSASLUsername: "walrelay", KafkaSASLPassword: testPassword}
	plainMech, err := o.kafkaSASL()
	if err != nil {
		t.Fatal(err)
	}
	o.KafkaSASLMechanism = "SCRAM-SHA-256"
	scramMech, err := o.kafkaSASL()
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if w := kafkaSecurityWarning(nil, plainMech); !strings.Contains(w, "SASL credentials travel in clear text") {
		t.Errorf("PLAIN without TLS: got %q; want the clear-text warning", w)
	}
	if w := kafkaSecurityWarning(nil, scramMech); !strings.Contains(w, "unencrypted") || strings.Contains(w, "clear text") {
		t.Errorf("SCRAM without TLS: got %q; want it to say the traffic is unencrypted", w)
	}
	for _, c := range []struct {
		name string
		tc   *tls.Config
		mech sasl.Mechanism
	}{{"PLAIN with TLS", tc, plainMech}, {"SCRAM with TLS", tc, scramMech}, {"TLS alone", tc, nil}, {"nothing", nil, nil}} {
		if w := kafkaSecurityWarning(c.tc, c.mech); w != "" {
			t.Errorf("%s: got warning %q; want none", c.name, w)
		}
	}
}

// The flags and variables reach the options; -h shows the password
// variable's name, never its value; and every verb that talks to Kafka
// fails at start on a bad setting, before connecting anywhere.
func TestKafkaSecurityFlags(t *testing.T) {
	t.Setenv("WALRELAY_KAFKA_SASL_PASSWORD", testPassword)
	t.Setenv("WALRELAY_KAFKA_TLS", "true")
	t.Setenv("GOMEMLIMIT", "off") // or `walrelay run` below sets a memory limit in the test binary
	var errOut bytes.Buffer
	o, err := parseOpts("run", []string{"--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", "walrelay",
		"--kafka-tls-server-name", "kafka.example"}, &errOut)
	if err != nil {
		t.Fatalf("parseOptions: %v\n%s", err, errOut.String())
	}
	if o.KafkaSASLPassword != testPassword || !o.KafkaTLS || o.KafkaSASLMechanism != "scram-sha-512" || o.KafkaTLSServerName != "kafka.example" {
		t.Errorf("options: got %+v; want the variables' password and TLS, the flags' mechanism and server name", o.kafkaSecurityOptions)
	}
	sc, err := o.sinkConfig()
	if err != nil || sc.TLS == nil || sc.TLS.ServerName != "kafka.example" || sc.SASL == nil || sc.SASL.Name() != "SCRAM-SHA-512" {
		t.Errorf("sinkConfig: got TLS %v, SASL %v, %v; want both", sc.TLS, sc.SASL, err)
	}

	var help bytes.Buffer
	if _, err := parseOpts("run", []string{"-h"}, &help); !errors.Is(err, errHelp) {
		t.Fatalf("-h: got %v; want errHelp", err)
	}
	for _, want := range []string{"-kafka-sasl-password", "WALRELAY_KAFKA_SASL_PASSWORD", "-kafka-tls-ca-file", "-kafka-sasl-password-file"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h: got no %s; want it", want)
		}
	}
	if strings.Contains(help.String(), testPassword) {
		t.Errorf("-h shows the password:\n%s", help.String())
	}

	for _, verb := range [][]string{{"run", "--metrics-addr", ""}, {"check"}, {"dlq", "retry", "--all"}} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(verb, "--postgres-url", "postgres://walrelay@127.0.0.1:1/x",
			"--kafka-sasl-mechanism", "GSSAPI"), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "--kafka-sasl-mechanism") || exitCode(err) != 2 {
			t.Errorf("walrelay %s with a bad mechanism: got %v; want an error naming --kafka-sasl-mechanism, exit code 2 (a setting)", verb, err)
		}
		if strings.Contains(err.Error()+out.String()+errOut.String(), testPassword) {
			t.Errorf("walrelay %s shows the password: %v\n%s%s", verb, err, out.String(), errOut.String())
		}
	}
}
