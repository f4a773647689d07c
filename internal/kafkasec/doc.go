// Package kafkasec turns walrelay's settings of TLS and SASL towards Kafka
// (files of certificates and keys, a mechanism, a user, a password or a
// file holding it) into what the sink takes: a *tls.Config and a
// sasl.Mechanism (sink.Config.TLS and SASL).
//
// Its errors name walrelay's flags and variables (--kafka-tls-ca-file,
// WALRELAY_KAFKA_SASL_MECHANISM), not the fields of Config: the package
// exists for walrelay's command line (run, check, dlq retry, recover,
// replay), each field is one flag, and what a user must change is that
// flag. An error never holds the password.
//
// It is not part of sink's public API on purpose: a program that publishes
// with sink builds its tls.Config and sasl.Mechanism itself, from whatever
// its own configuration says; files and password files are walrelay's way.
//
// Internal: walrelay's own, for cmd/walrelay.
package kafkasec
