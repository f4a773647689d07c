package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/slot"
)

func TestMergeConnString(t *testing.T) {
	for _, tc := range []struct {
		name, base string
		params     []connParam
		want       string
	}{
		{"nothing set", "postgres://u:pw@h/db?sslmode=disable", nil, "postgres://u:pw@h/db?sslmode=disable"},
		{"URL: flags replace the URL's parameters, the rest stays",
			"postgres://u:old@h:5432/db?sslmode=disable&application_name=x",
			[]connParam{{"sslmode", "verify-full"}, {"sslrootcert", "/etc/ca.pem"}, {"password", "p w"}},
			"postgres://u:p%20w@h:5432/db?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem"},
		{"URL without userinfo gets one", "postgres://h/db", []connParam{{"password", "pw"}}, "postgres://:pw@h/db"},
		{"URL without a path", "postgres://u@h", []connParam{{"sslmode", "require"}}, "postgres://u@h?sslmode=require"},
		{"multi-host URL, ssl=true dropped with the sslmode it means",
			"postgresql://u@h1:5432,h2/db?ssl=true&connect_timeout=5",
			[]connParam{{"sslmode", "verify-full"}},
			"postgresql://u@h1:5432,h2/db?connect_timeout=5&sslmode=verify-full"},
		{"a password in the query is replaced too, encodings kept",
			"postgres://u@h/db?password=old&options=-c%20x%3Dy&pass%77ord=older",
			[]connParam{{"password", "new"}},
			"postgres://u:new@h/db?options=-c%20x%3Dy"},
		{"keyword/value: appended, quoted and escaped",
			"host=h user=u password=old",
			[]connParam{{"sslmode", "verify-full"}, {"password", `it's\a`}},
			`host=h user=u password=old sslmode='verify-full' password='it\'s\\a'`},
		{"keyword/value ending in an escaped backslash", `host=h user=a\\`, []connParam{{"sslmode", "require"}},
			`host=h user=a\\ sslmode='require'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mergeConnString(tc.base, tc.params)
			if err != nil {
				t.Fatalf("mergeConnString(%q): got error %v; want %q", tc.base, err, tc.want)
			}
			if got != tc.want {
				t.Errorf("mergeConnString(%q)\n got %s\nwant %s", tc.base, got, tc.want)
			}
		})
	}
	if _, err := mergeConnString(`host=h user=a\`, []connParam{{"sslmode", "require"}}); err == nil {
		t.Errorf("keyword/value ending in a lone backslash: got nil error; want one")
	}
}

// Whatever the password holds, pgconn reads back exactly it, in both forms,
// and the rest of the connection string keeps its meaning.
func TestMergedPasswordRoundTrips(t *testing.T) {
	cleanPGEnv(t)
	bases := []string{
		"postgres://u:old@127.0.0.1:5432/db?sslmode=disable&options=-c%20search_path%3Dx",
		"host=127.0.0.1 port=5432 user=u password=old dbname=db sslmode=disable options='-c search_path=x'",
	}
	for _, pw := range []string{"plain", `p@ss:w/rd?#&=+%20 'q' "d" \b`, "ünïcödé", " spaces ", `ends\`, "a\nb"} {
		for _, base := range bases {
			conn, err := mergeConnString(base, []connParam{{"password", pw}})
			if err != nil {
				t.Fatalf("merge %q into %q: %v", pw, base, err)
			}
			pc, err := pgconn.ParseConfig(conn)
			if err != nil {
				t.Fatalf("parse %q merged into %q: got %v; want a config", pw, base, err)
			}
			if pc.Password != pw || pc.User != "u" || pc.Database != "db" || pc.RuntimeParams["options"] != "-c search_path=x" {
				t.Errorf("%q merged into %q: got password %q, user %q, database %q, options %q; want %q, u, db, -c search_path=x",
					pw, base, pc.Password, pc.User, pc.Database, pc.RuntimeParams["options"], pw)
			}
		}
	}
}

// The flags win over the connection string's own sslmode.
func TestSSLModeFlagOverrides(t *testing.T) {
	cleanPGEnv(t)
	for _, base := range []string{"postgres://u@db.example/x?sslmode=disable", "postgres://u@db.example/x?ssl=true&sslmode=disable",
		"host=db.example user=u sslmode=disable"} {
		o := options{PostgresURL: base, Postgres: postgresOptions{SSLMode: "require"}}
		conn, err := o.postgresConnString()
		if err != nil {
			t.Fatalf("%q: %v", base, err)
		}
		if got, err := slot.TLSVerification(conn); err != nil || got != slot.TLSUnverified {
			t.Errorf("%q with --postgres-sslmode require: got %s, %v; want %s", base, got, err, slot.TLSUnverified)
		}
	}
	o := options{PostgresURL: "postgres://h/x", Postgres: postgresOptions{SSLMode: "verify_full"}}
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
		o := options{PostgresURL: "host=h", Postgres: postgresOptions{PasswordFile: write("pw", content)}}
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
		o := options{PostgresURL: "host=h", Postgres: postgresOptions{PasswordFile: path}}
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
	want := postgresOptions{SSLMode: "verify-full", SSLRootCert: "/flag.pem", SSLCert: "/c.pem", SSLKey: "/k.pem", PasswordFile: "/run/secrets/pg"}
	if o.Postgres != want {
		t.Errorf("postgres options: got %+v; want %+v", o.Postgres, want)
	}
}

func TestPostgresURLIsRequired(t *testing.T) {
	_, err := options{Postgres: postgresOptions{SSLMode: "verify-full"}}.postgresConnString()
	if err == nil || !strings.Contains(err.Error(), "--postgres-url") {
		t.Errorf("no URL: got %v; want an error asking for --postgres-url", err)
	}
}

// cleanPGEnv makes pgconn see no PG* variables and no ~/.pgpass or
// ~/.postgresql files, so that only the connection string decides.
func cleanPGEnv(t *testing.T) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	for _, name := range []string{"PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSWORD", "PGPASSFILE", "PGOPTIONS",
		"PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY", "PGSSLCERTMODE", "PGSSLNEGOTIATION", "PGSERVICE", "PGSERVICEFILE"} {
		t.Setenv(name, "") // restores the value after the test
		os.Unsetenv(name)
	}
}
