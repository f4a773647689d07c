package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/slot"
)

// The flags win over the connection string's own sslmode.
func TestSSLModeFlagOverrides(t *testing.T) {
	pgtest.CleanEnv(t)
	for _, base := range []string{"postgres://u@db.example/x?sslmode=disable", "postgres://u@db.example/x?ssl=true&sslmode=disable",
		"host=db.example user=u sslmode=disable"} {
		o := options{PostgresURL: base, Postgres: slot.ConnParams{SSLMode: "require"}}
		conn, err := o.postgresConnString()
		if err != nil {
			t.Fatalf("%q: %v", base, err)
		}
		if got, err := slot.TLSVerification(conn); err != nil || got != slot.TLSUnverified {
			t.Errorf("%q with --postgres-sslmode require: got %s, %v; want %s", base, got, err, slot.TLSUnverified)
		}
	}
	o := options{PostgresURL: "postgres://h/x", Postgres: slot.ConnParams{SSLMode: "verify_full"}}
	if _, err := o.postgresConnString(); err == nil || !strings.Contains(err.Error(), "--postgres-sslmode") {
		t.Errorf("sslmode verify_full: got %v; want an error naming --postgres-sslmode", err)
	}
}

func TestPasswordFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for content, want := range map[string]string{
		"s3cret":        "s3cret",
		"s3cret\n":      "s3cret",
		"s3cret\r\n":    "s3cret",
		"s3cret\n\n":    "s3cret\n", // one line break only
		" s3 cret \t\n": " s3 cret \t",
	} {
		o := options{PostgresURL: "host=h", Postgres: slot.ConnParams{PasswordFile: write("pw", content)}}
		conn, err := o.postgresConnString()
		if err != nil {
			t.Fatalf("password file %q: %v", content, err)
		}
		if wantConn := "host=h password='" + want + "'"; conn != wantConn {
			t.Errorf("password file %q: got %q; want %q", content, conn, wantConn)
		}
	}
	for name, path := range map[string]string{
		"missing":     filepath.Join(dir, "nothing-here"),
		"a directory": dir,
		"empty":       write("empty", "\n"),
		"NUL byte":    write("nul", "s3cret\x00more"),
	} {
		o := options{PostgresURL: "host=h", Postgres: slot.ConnParams{PasswordFile: path}}
		_, err := o.postgresConnString()
		if err == nil {
			t.Errorf("%s password file: got nil error; want one", name)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "--postgres-password-file") || !strings.Contains(msg, path) || strings.Contains(msg, "s3cret") {
			t.Errorf("%s password file: got %q; want the flag and the path named, never the content", name, msg)
		}
	}
}

func TestPostgresFlagsFromEnvironment(t *testing.T) {
	t.Setenv("WALRELAY_POSTGRES_SSLMODE", "verify-full")
	t.Setenv("WALRELAY_POSTGRES_SSLROOTCERT", "/etc/ca.pem")
	t.Setenv("WALRELAY_POSTGRES_PASSWORD_FILE", "/run/secrets/pg")
	var errOut bytes.Buffer
	o, err := parseOpts("run", []string{"--postgres-sslcert", "/c.pem", "--postgres-sslkey", "/k.pem", "--postgres-sslrootcert", "/flag.pem"}, &errOut)
	if err != nil {
		t.Fatalf("parseOptions: %v\n%s", err, errOut.String())
	}
	want := slot.ConnParams{SSLMode: "verify-full", SSLRootCert: "/flag.pem", SSLCert: "/c.pem", SSLKey: "/k.pem", PasswordFile: "/run/secrets/pg"}
	if o.Postgres != want {
		t.Errorf("postgres options: got %+v; want %+v", o.Postgres, want)
	}
}

func TestPostgresURLIsRequired(t *testing.T) {
	_, err := options{Postgres: slot.ConnParams{SSLMode: "verify-full"}}.postgresConnString()
	if err == nil || !strings.Contains(err.Error(), "--postgres-url") {
		t.Errorf("no URL: got %v; want an error asking for --postgres-url", err)
	}
}
