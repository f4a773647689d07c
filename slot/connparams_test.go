package slot

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/testkit/pgtest"
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
	pgtest.CleanEnv(t)
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

func TestRedactConnString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://relay:s3cret@db:5432/app?sslmode=verify-full", "postgres://relay:xxxxx@db:5432/app?sslmode=verify-full"},
		{"postgresql://relay@db/app", "postgresql://relay@db/app"},
		{"postgres://db/app?password=s3cret&sslpassword=k3y", "postgres://db/app?password=xxxxx&sslpassword=xxxxx"},
		{"host=db user=relay password=s3cret dbname=app", "host=db user=relay password=xxxxx dbname=app"},
		{`host=db password='s3 c\'ret' sslpassword = k3y`, "host=db password=xxxxx sslpassword=xxxxx"},
		{"postgres://relay:s3cret@db1:5432,db2/app?sslmode=require&password=s3cret", "postgres://relay:xxxxx@db1:5432,db2/app?sslmode=require&password=xxxxx"},
		{"postgres://relay:s3cret@db/app?options=-c%20x", "postgres://relay:xxxxx@db/app?options=-c%20x"},
	}
	for _, c := range cases {
		got := RedactConnString(c.in)
		if got != c.want {
			t.Errorf("RedactConnString(%q): got %q; want %q", c.in, got, c.want)
		}
		for _, secret := range []string{"s3cret", "k3y", "s3 c"} {
			if strings.Contains(got, secret) {
				t.Errorf("RedactConnString(%q) = %q still shows %q", c.in, got, secret)
			}
		}
	}
}
