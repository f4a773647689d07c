package main

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// Every flag a setting maps to is a flag of some verb.
func TestSettingFlagsExist(t *testing.T) {
	flagToken := regexp.MustCompile(`--[a-z0-9-]+`)
	for _, sf := range settingFlags {
		if !strings.HasPrefix(sf[1], "--") {
			continue // a command, not a flag
		}
		for _, name := range flagToken.FindAllString(sf[1], -1) {
			found := false
			for _, verb := range verbNames() {
				var o options
				s := newFlagSet(verb)
				bindVerb(verb, s, &o)
				found = found || s.Has(strings.TrimPrefix(name, "--"))
			}
			if !found {
				t.Errorf("setting %s maps to %s: got no verb with %s; want one", sf[0], sf[1], name)
			}
		}
	}
}

// A package's error, as walrelay reports it, names the flag, and still
// unwraps to the package's error.
func TestErrorsSayFlags(t *testing.T) {
	big := &slot.TooLargeError{Slot: "s", Size: 2 << 20, Limit: 1 << 20}
	err := flagged(big)
	if !strings.Contains(err.Error(), "(--max-wal-message-bytes)") || strings.Contains(err.Error(), slot.SettingMaxMessageBytes) {
		t.Errorf("flagged TooLargeError: got %q; want it to name --max-wal-message-bytes, not %s", err, slot.SettingMaxMessageBytes)
	}
	var got *slot.TooLargeError
	if !errors.As(err, &got) || got != big {
		t.Errorf("errors.As through flagged: got %v; want the *TooLargeError", got)
	}
	if flagged(nil) != nil {
		t.Errorf("flagged(nil): got non-nil; want nil")
	}
}

func TestReportSaysFlags(t *testing.T) {
	r := reportWithFlags(check.Report{check.Failure("slot database", "x", "Point "+slot.SettingConnString+" at it, or set "+slot.SettingSlot+".")})
	if want := "Point --postgres-url at it, or set --slot."; r[0].Fix != want {
		t.Errorf("fix: got %q; want %q", r[0].Fix, want)
	}
	// The Kafka settings: the longer names are not cut by the shorter.
	r = reportWithFlags(check.Report{check.Failure("kafka reachable", "x",
		"Check "+sink.SettingTLSTrust+", then "+sink.SettingClientCert+", "+sink.SettingTLS+" and "+sink.SettingSASL+" on "+sink.SettingBrokers+".")})
	want := "Check --kafka-tls-ca-file, --kafka-tls-server-name, then --kafka-tls-cert-file, --kafka-tls-key-file, --kafka-tls and " +
		"--kafka-sasl-mechanism, --kafka-sasl-username, --kafka-sasl-password or --kafka-sasl-password-file on --kafka-brokers."
	if r[0].Fix != want {
		t.Errorf("fix: got %q; want %q", r[0].Fix, want)
	}
}

// Log lines name flags in the message, string fields and error fields;
// other fields are untouched.
func TestLogsSayFlags(t *testing.T) {
	var out bytes.Buffer
	log, err := newLogger("info", &out)
	if err != nil {
		t.Fatal(err)
	}
	log.With(zap.String("hint", "see "+slot.SettingSlot)).Error("over "+slot.SettingMaxMessageBytes,
		zap.Error(&slot.TooLargeError{Slot: "s", Size: 2, Limit: 1}), zap.Int("n", 7), zap.String("plain", "as is"))
	line := out.String()
	for _, want := range []string{`"msg":"over --max-wal-message-bytes"`, `"hint":"see --slot"`, `(--max-wal-message-bytes); raise`, `"n":7`, `"plain":"as is"`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %s: want %s in it", line, want)
		}
	}
	if strings.Contains(line, "slot.Config.") {
		t.Errorf("log line %s: want no setting names left", line)
	}
}
