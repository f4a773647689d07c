package main

import (
	"bytes"
	"strings"
	"testing"
)

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
		got := redactConnString(c.in)
		if got != c.want {
			t.Errorf("redactConnString(%q): got %q; want %q", c.in, got, c.want)
		}
		for _, secret := range []string{"s3cret", "k3y", "s3 c"} {
			if strings.Contains(got, secret) {
				t.Errorf("redactConnString(%q) = %q still shows %q", c.in, got, secret)
			}
		}
	}
}

// -h shows the URL from its variable without the password, and the value
// of a password flag not at all; the values still reach the options.
func TestHelpNeverShowsSecrets(t *testing.T) {
	t.Setenv("WALRELAY_POSTGRES_URL", "postgres://relay:s3cret@db/app")
	var help bytes.Buffer
	if _, err := parseOpts("run", []string{"-h"}, &help); err != errHelp {
		t.Fatalf("parse -h: got %v; want errHelp", err)
	}
	if strings.Contains(help.String(), "s3cret") || !strings.Contains(help.String(), "postgres://relay:xxxxx@db/app") {
		t.Errorf("-h: want the URL with xxxxx for its password:\n%s", help.String())
	}
	o, err := parseOpts("run", nil, &help)
	if err != nil || o.PostgresURL != "postgres://relay:s3cret@db/app" {
		t.Errorf("options from the variable: got %q, %v; want the URL as given", o.PostgresURL, err)
	}
	o, err = parseOpts("run", []string{"--postgres-url", "postgres://other@db/app"}, &help)
	if err != nil || o.PostgresURL != "postgres://other@db/app" {
		t.Errorf("the flag over the variable: got %q, %v", o.PostgresURL, err)
	}
}
