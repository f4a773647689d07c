package main

import "github.com/walrelay/walrelay/internal/kafkasec"

// kafkaSecurityFlags binds the flags of TLS and SASL towards Kafka. Every
// verb that talks to Kafka (run, check, dlq retry) has them; package
// kafkasec turns them into the sink's TLS configuration and SASL mechanism.
func kafkaSecurityFlags(s *flagSet, o *kafkasec.Config) {
	s.Bool(&o.TLS, "kafka-tls", "talk TLS to the Kafka brokers, verified with the system's roots (or --kafka-tls-ca-file); any --kafka-tls-*-file turns it on")
	s.Str(&o.CAFile, "kafka-tls-ca-file", "PEM bundle of the CAs that signed the brokers' certificates; replaces the system's roots")
	s.Str(&o.CertFile, "kafka-tls-cert-file", "PEM client certificate (with its chain) for brokers that ask for one; needs --kafka-tls-key-file")
	s.Str(&o.KeyFile, "kafka-tls-key-file", "PEM unencrypted private key of --kafka-tls-cert-file")
	s.Str(&o.ServerName, "kafka-tls-server-name", "name to verify in the brokers' certificates instead of each broker's host")
	s.Str(&o.SASLMechanism, "kafka-sasl-mechanism", "SASL mechanism towards Kafka: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no SASL")
	s.Str(&o.SASLUsername, "kafka-sasl-username", "SASL user name")
	s.Secret(&o.SASLPassword, "kafka-sasl-password", "SASL password (prefer the variable or --kafka-sasl-password-file: a flag shows in the process list)", nil)
	s.Str(&o.SASLPasswordFile, "kafka-sasl-password-file", "file holding the SASL password (one trailing newline is ignored)")
}
