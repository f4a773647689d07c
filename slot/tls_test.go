package slot_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/slot"
)

// writeCA writes a self-signed CA certificate and returns its file:
// pgconn reads sslrootcert as it parses.
func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "walrelay test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTLSVerification(t *testing.T) {
	pgtest.CleanEnv(t)
	ca := writeCA(t)
	for _, tc := range []struct {
		name, conn string
		want       slot.TLSState
	}{
		{"disable", "postgres://u@db.example/x?sslmode=disable", slot.TLSPlain},
		{"allow tries plain first", "postgres://u@db.example/x?sslmode=allow", slot.TLSPlain},
		{"prefer falls back to plain", "postgres://u@db.example/x?sslmode=prefer", slot.TLSPlain},
		{"no sslmode is prefer", "postgres://u@db.example/x", slot.TLSPlain},
		{"keyword/value default", "host=db.example user=u", slot.TLSPlain},
		{"require", "postgres://u@db.example/x?sslmode=require", slot.TLSUnverified},
		{"ssl=true is require", "postgres://u@db.example/x?ssl=true", slot.TLSUnverified},
		{"direct negotiation makes prefer require", "postgres://u@db.example/x?sslnegotiation=direct", slot.TLSUnverified},
		{"require with a root certificate checks it", "postgres://u@db.example/x?sslmode=require&sslrootcert=" + ca, slot.TLSVerifyCA},
		{"verify-ca", "postgres://u@db.example/x?sslmode=verify-ca&sslrootcert=" + ca, slot.TLSVerifyCA},
		{"verify-full", "postgres://u@db.example/x?sslmode=verify-full&sslrootcert=" + ca, slot.TLSVerifyFull},
		{"verify-full at an IP address", "postgres://u@127.0.0.1:5432/x?sslmode=verify-full&sslrootcert=" + ca, slot.TLSVerifyFull},
		{"keyword/value verify-full", "host=db.example user=u sslmode=verify-full sslrootcert='" + ca + "'", slot.TLSVerifyFull},
		{"system roots are verify-full", "postgres://u@db.example/x?sslmode=require&sslrootcert=system", slot.TLSVerifyFull},
		{"a later sslmode wins", "host=db.example user=u sslmode=verify-full sslrootcert=" + ca + " sslmode=prefer", slot.TLSPlain},
		{"unix socket", "host=/var/run/postgresql user=u", slot.TLSSocket},
		{"unix socket in a URL", "postgres://u@%2Fvar%2Frun%2Fpostgresql/x?sslmode=disable", slot.TLSSocket},
		{"every host verified", "postgres://u@db1.example,db2.example:5433/x?sslmode=verify-full&sslrootcert=" + ca, slot.TLSVerifyFull},
		{"socket and a plain host", "host=/var/run/postgresql,db.example user=u", slot.TLSPlain},
		{"socket and a verified host", "host=/var/run/postgresql,db.example user=u sslmode=verify-full sslrootcert=" + ca, slot.TLSVerifyFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := slot.TLSVerification(tc.conn)
			if err != nil {
				t.Fatalf("TLSVerification(%q): got error %v; want %s", tc.conn, err, tc.want)
			}
			if got != tc.want {
				t.Errorf("TLSVerification(%q) = %s; want %s", tc.conn, got, tc.want)
			}
			if got.OK() != (tc.want == slot.TLSVerifyFull || tc.want == slot.TLSSocket) {
				t.Errorf("%s.OK() = %v; want true only for verify-full and unix sockets", got, got.OK())
			}
		})
	}
}

// libpq's variables count as pgconn reads them: below the connection
// string, above the defaults.
func TestTLSVerificationReadsPGVariables(t *testing.T) {
	pgtest.CleanEnv(t)
	t.Setenv("PGSSLMODE", "verify-full")
	t.Setenv("PGSSLROOTCERT", writeCA(t))
	for conn, want := range map[string]slot.TLSState{
		"postgres://u@db.example/x":                  slot.TLSVerifyFull,
		"postgres://u@db.example/x?sslmode=require":  slot.TLSVerifyCA, // the variable's root certificate still counts
		"postgres://u@db.example/x?sslmode=disable":  slot.TLSPlain,
		"host=db.example user=u sslmode=verify-full": slot.TLSVerifyFull,
	} {
		got, err := slot.TLSVerification(conn)
		if err != nil || got != want {
			t.Errorf("TLSVerification(%q) with PGSSLMODE=verify-full: got %s, %v; want %s", conn, got, err, want)
		}
	}
}

func TestTLSVerificationErrors(t *testing.T) {
	pgtest.CleanEnv(t)
	for name, conn := range map[string]string{
		"unknown sslmode":      "postgres://u:s3cr3t-pw@db.example/x?sslmode=bogus",
		"missing root file":    "postgres://u:s3cr3t-pw@db.example/x?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
		"keyword/value broken": "host=db.example password=s3cr3t-pw sslmode='verify-full",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := slot.TLSVerification(conn)
			if err == nil {
				t.Fatalf("TLSVerification(%q): got nil error; want one", conn)
			}
			if strings.Contains(err.Error(), "s3cr3t-pw") {
				t.Errorf("error %q holds the password; want it left out", err)
			}
		})
	}
}

func TestTLSStateNames(t *testing.T) {
	seen := map[string]bool{}
	for s := slot.TLSPlain; s <= slot.TLSSocket; s++ {
		if seen[s.String()] || strings.HasPrefix(s.String(), "TLSState(") {
			t.Errorf("TLSState %d: name %q is a duplicate or missing", int(s), s)
		}
		seen[s.String()] = true
		if s.Describe() == s.String() {
			t.Errorf("%s: got no description; want a sentence", s)
		}
	}
}
