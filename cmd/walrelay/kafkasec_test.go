package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

const testPassword = "s3cret-Pa55word"

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
	if k := o.KafkaSecurity; k.SASLPassword != testPassword || !k.TLS || k.SASLMechanism != "scram-sha-512" || k.ServerName != "kafka.example" {
		t.Errorf("options: got %+v; want the variables' password and TLS, the flags' mechanism and server name", o.KafkaSecurity)
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
