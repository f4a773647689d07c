package kafkasec

import (
	"crypto/tls"
	"crypto/x509"
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
func TestBuildRefusesBadSettings(t *testing.T) {
	ca := testkit.NewCA(t)
	cert, key := ca.Issue(t, "walrelay")
	_, otherKey := ca.Issue(t, "other")
	scram := func(o Config) Config {
		o.SASLMechanism, o.SASLUsername = "SCRAM-SHA-512", "walrelay"
		return o
	}
	tests := []struct {
		name string
		o    Config
		want string
	}{
		{"missing CA file", Config{CAFile: filepath.Join(t.TempDir(), "nope.pem")}, "--kafka-tls-ca-file: open "},
		{"CA file without PEM", Config{CAFile: writeFile(t, "ca.pem", "not a certificate\n")}, "holds no PEM certificate"},
		{"CA file holding a key", Config{CAFile: key}, "PEM block 1 is a PRIVATE KEY, not a CERTIFICATE"},
		{"CA file with a broken certificate", Config{CAFile: writeFile(t, "bad.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")}, "--kafka-tls-ca-file: "},
		{"certificate without key", Config{CertFile: cert}, "--kafka-tls-cert-file and --kafka-tls-key-file go together"},
		{"key without certificate", Config{KeyFile: key}, "--kafka-tls-cert-file and --kafka-tls-key-file go together"},
		{"key of another certificate", Config{CertFile: cert, KeyFile: otherKey}, "--kafka-tls-cert-file " + cert + " with --kafka-tls-key-file"},
		{"server name without TLS", Config{ServerName: "kafka.example"}, "--kafka-tls-server-name is set but TLS is off"},
		{"unknown mechanism", Config{SASLMechanism: "GSSAPI", SASLUsername: "u", SASLPassword: testPassword}, `--kafka-sasl-mechanism (WALRELAY_KAFKA_SASL_MECHANISM) is "GSSAPI"; want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
		{"mechanism without user", Config{SASLMechanism: "PLAIN", SASLPassword: testPassword}, "--kafka-sasl-mechanism PLAIN needs --kafka-sasl-username and a password"},
		{"mechanism without password", scram(Config{}), "--kafka-sasl-mechanism SCRAM-SHA-512 needs --kafka-sasl-username and a password"},
		{"user without mechanism", Config{SASLUsername: "walrelay"}, "--kafka-sasl-mechanism is empty"},
		{"password without mechanism", Config{SASLPassword: testPassword}, "--kafka-sasl-mechanism is empty"},
		{"password file without mechanism", Config{SASLPasswordFile: writeFile(t, "pw", testPassword)}, "--kafka-sasl-mechanism is empty"},
		{"password and password file", scram(Config{SASLPassword: testPassword, SASLPasswordFile: writeFile(t, "pw", testPassword)}), "both --kafka-sasl-password (or WALRELAY_KAFKA_SASL_PASSWORD) and --kafka-sasl-password-file are set"},
		{"missing password file", scram(Config{SASLPasswordFile: filepath.Join(t.TempDir(), "pw")}), "--kafka-sasl-password-file (WALRELAY_KAFKA_SASL_PASSWORD_FILE): open "},
		{"empty password file", scram(Config{SASLPasswordFile: writeFile(t, "pw", "\n")}), "holds no password"},
		// The SCRAM library's own error would quote the password.
		{"password SCRAM refuses", scram(Config{SASLPassword: testPassword + "\x07"}), "has characters SCRAM does not allow"},
	}
	for _, tt := range tests {
		tc, mech, err := tt.o.Build()
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
func TestTLSConfig(t *testing.T) {
	ca := testkit.NewCA(t)
	cert, key := ca.Issue(t, "walrelay")
	server, _ := ca.Issue(t, "broker", "kafka-1.example")
	if tc, mech, err := (Config{}).Build(); tc != nil || mech != nil || err != nil {
		t.Errorf("no flags: got %v, %v, %v; want no TLS, no SASL", tc, mech, err)
	}
	tests := []struct {
		name     string
		o        Config
		roots    bool // RootCAs is the CA file
		certs    int
		hostname string
	}{
		{"system roots", Config{TLS: true}, false, 0, ""},
		{"CA file implies TLS", Config{CAFile: ca.File()}, true, 0, ""},
		{"client certificate implies TLS", Config{CertFile: cert, KeyFile: key}, false, 1, ""},
		{"all of it", Config{TLS: true, CAFile: ca.File(), CertFile: cert, KeyFile: key, ServerName: "kafka-1.example"}, true, 1, "kafka-1.example"},
	}
	for _, tt := range tests {
		tc, err := tt.o.TLSConfig()
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
func TestSASLMechanism(t *testing.T) {
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
		o := Config{SASLMechanism: tt.mechanism, SASLUsername: "walrelay", SASLPassword: tt.password}
		if tt.file != "" {
			o.SASLPasswordFile = writeFile(t, "pw", tt.file)
		}
		mech, err := o.Mechanism()
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
func TestWarning(t *testing.T) {
	o := Config{SASLMechanism: "PLAIN", SASLUsername: "walrelay", SASLPassword: testPassword}
	plainMech, err := o.Mechanism()
	if err != nil {
		t.Fatal(err)
	}
	o.SASLMechanism = "SCRAM-SHA-256"
	scramMech, err := o.Mechanism()
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if w := Warning(nil, plainMech); !strings.Contains(w, "SASL credentials travel in clear text") {
		t.Errorf("PLAIN without TLS: got %q; want the clear-text warning", w)
	}
	if w := Warning(nil, scramMech); !strings.Contains(w, "unencrypted") || strings.Contains(w, "clear text") {
		t.Errorf("SCRAM without TLS: got %q; want it to say the traffic is unencrypted", w)
	}
	for _, c := range []struct {
		name string
		tc   *tls.Config
		mech sasl.Mechanism
	}{{"PLAIN with TLS", tc, plainMech}, {"SCRAM with TLS", tc, scramMech}, {"TLS alone", tc, nil}, {"nothing", nil, nil}} {
		if w := Warning(c.tc, c.mech); w != "" {
			t.Errorf("%s: got warning %q; want none", c.name, w)
		}
	}
}

func TestMechanismName(t *testing.T) {
	if got := MechanismName(nil); got != "none" {
		t.Errorf("no SASL: got %q; want none", got)
	}
	if got := MechanismName(plain.Mechanism{Username: "walrelay", Password: testPassword}); got != "PLAIN" {
		t.Errorf("PLAIN: got %q; want PLAIN", got)
	}
}
