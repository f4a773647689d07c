package main

import (
	"bytes"
	"strings"
	"testing"
)

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
