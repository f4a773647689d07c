package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	o, err := parseOptions([]string{"--postgres-url", "postgres://x/y"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := options{
		PostgresURL: "postgres://x/y", KafkaBrokers: "127.0.0.1:9092", Topic: "outbox.order", Group: "notifier",
		ConsumerID: "notifier", SMTPAddr: "127.0.0.1:2525", From: "orders@example.com",
		RetryMin: time.Second, RetryMax: time.Minute, PollInterval: 200 * time.Millisecond, Lease: 30 * time.Second,
		SMTPTimeout: 10 * time.Second, SessionTimeout: 30 * time.Second, LogLevel: "info",
	}
	if o != want {
		t.Errorf("defaults = %+v\nwant %+v", o, want)
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--postgres-url is required"},
		{[]string{"--kafka-brokers", " , "}, "--kafka-brokers is required"},
		{[]string{"--group", ""}, "--group must not be empty"},
		{[]string{"--smtp-addr", "nohost"}, "--smtp-addr"},
		{[]string{"--from", "nobody"}, "--from"},
		{[]string{"--retry-min", "2s", "--retry-max", "1s"}, "--retry-min"},
		{[]string{"--retry-min", "0s"}, "--retry-min"},
		{[]string{"--lease", "5s", "--smtp-timeout", "5s"}, "--lease"},
		{[]string{"--session-timeout", "10ms"}, "--session-timeout"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		args := c.args
		if c.want != "--postgres-url is required" {
			args = append([]string{"--postgres-url", "postgres://x/y"}, args...)
		}
		_, err := parseOptions(args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseOptions(%q) = %v; want an error with %q", c.args, err, c.want)
		}
	}
}
