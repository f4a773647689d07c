package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/walrelay/walrelay/internal/secretfile"
)

// The SASL mechanisms of --kafka-sasl-mechanism, as Kafka names them.
const (
	saslPlain       = "PLAIN"
	saslSCRAMSHA256 = "SCRAM-SHA-256"
	saslSCRAMSHA512 = "SCRAM-SHA-512"
)

// kafkaSecurityOptions are the flags of TLS and SASL towards Kafka. Every
// verb that talks to Kafka (run, check, dlq retry) applies them.
type kafkaSecurityOptions struct {
	KafkaTLS              bool
	KafkaTLSCAFile        string
	KafkaTLSCertFile      string
	KafkaTLSKeyFile       string
	KafkaTLSServerName    string
	KafkaSASLMechanism    string
	KafkaSASLUsername     string
	KafkaSASLPassword     string // never logged, printed or put into an error
	KafkaSASLPasswordFile string
}

// kafkaSecurityFlags binds the flags of TLS and SASL towards Kafka.
func kafkaSecurityFlags(s *flagSet, o *kafkaSecurityOptions) {
	s.boolean(&o.KafkaTLS, "kafka-tls", "talk TLS to the Kafka brokers, verified with the system's roots (or --kafka-tls-ca-file); any --kafka-tls-*-file turns it on")
	s.str(&o.KafkaTLSCAFile, "kafka-tls-ca-file", "PEM bundle of the CAs that signed the brokers' certificates; replaces the system's roots")
	s.str(&o.KafkaTLSCertFile, "kafka-tls-cert-file", "PEM client certificate (with its chain) for brokers that ask for one; needs --kafka-tls-key-file")
	s.str(&o.KafkaTLSKeyFile, "kafka-tls-key-file", "PEM unencrypted private key of --kafka-tls-cert-file")
	s.str(&o.KafkaTLSServerName, "kafka-tls-server-name", "name to verify in the brokers' certificates instead of each broker's host")
	s.str(&o.KafkaSASLMechanism, "kafka-sasl-mechanism", "SASL mechanism towards Kafka: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no SASL")
	s.str(&o.KafkaSASLUsername, "kafka-sasl-username", "SASL user name")
	s.secret(&o.KafkaSASLPassword, "kafka-sasl-password", "SASL password (prefer the variable or --kafka-sasl-password-file: a flag shows in the process list)", nil)
	s.str(&o.KafkaSASLPasswordFile, "kafka-sasl-password-file", "file holding the SASL password (one trailing newline is ignored)")
}

// kafkaSecurity builds the TLS configuration and the SASL mechanism the
// flags ask for; nil for what is not asked. An error names the flag and
// never holds the password.
func (o kafkaSecurityOptions) kafkaSecurity() (*tls.Config, sasl.Mechanism, error) {
	tc, err := o.kafkaTLS()
	if err != nil {
		return nil, nil, err
	}
	mech, err := o.kafkaSASL()
	if err != nil {
		return nil, nil, err
	}
	return tc, mech, nil
}

// kafkaTLS is the TLS configuration of the flags, or nil without TLS.
func (o kafkaSecurityOptions) kafkaTLS() (*tls.Config, error) {
	files := o.KafkaTLSCAFile != "" || o.KafkaTLSCertFile != "" || o.KafkaTLSKeyFile != ""
	if !o.KafkaTLS && !files {
		if o.KafkaTLSServerName != "" {
			return nil, errors.New("--kafka-tls-server-name is set but TLS is off: set --kafka-tls (WALRELAY_KAFKA_TLS=true) too")
		}
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.KafkaTLSServerName}
	if o.KafkaTLSCAFile != "" {
		pool, err := readCABundle(o.KafkaTLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("--kafka-tls-ca-file: %w", err)
		}
		tc.RootCAs = pool
	}
	switch {
	case (o.KafkaTLSCertFile == "") != (o.KafkaTLSKeyFile == ""):
		return nil, errors.New("--kafka-tls-cert-file and --kafka-tls-key-file go together: set both for a client certificate, or neither")
	case o.KafkaTLSCertFile != "":
		cert, err := tls.LoadX509KeyPair(o.KafkaTLSCertFile, o.KafkaTLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--kafka-tls-cert-file %s with --kafka-tls-key-file %s: %w", o.KafkaTLSCertFile, o.KafkaTLSKeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// readCABundle reads a PEM file of CA certificates. Unlike
// x509.CertPool.AppendCertsFromPEM, it refuses a file with no certificate,
// with a certificate that does not parse, or with anything else in it (a
// private key, say), rather than trusting what parsed.
func readCABundle(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s: PEM block %d is a %s, not a CERTIFICATE", path, n, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: PEM block %d: %w", path, n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// kafkaSASL is the SASL mechanism of the flags, or nil without SASL.
func (o kafkaSecurityOptions) kafkaSASL() (sasl.Mechanism, error) {
	name := strings.ToUpper(strings.TrimSpace(o.KafkaSASLMechanism))
	credentials := o.KafkaSASLUsername != "" || o.KafkaSASLPassword != "" || o.KafkaSASLPasswordFile != ""
	if name == "" {
		if credentials {
			return nil, errors.New("--kafka-sasl-username or a password is set but --kafka-sasl-mechanism is empty: set it to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
		return nil, nil
	}
	if name != saslPlain && name != saslSCRAMSHA256 && name != saslSCRAMSHA512 {
		return nil, fmt.Errorf("--kafka-sasl-mechanism (WALRELAY_KAFKA_SASL_MECHANISM) is %q; want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (or empty for no SASL)", o.KafkaSASLMechanism)
	}
	password, err := o.kafkaSASLPassword()
	if err != nil {
		return nil, err
	}
	if o.KafkaSASLUsername == "" || password == "" {
		return nil, fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-username and a password (--kafka-sasl-password, WALRELAY_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file)", name)
	}
	if name == saslPlain {
		return plain.Mechanism{Username: o.KafkaSASLUsername, Password: password}, nil
	}
	algo := scram.SHA512
	if name == saslSCRAMSHA256 {
		algo = scram.SHA256
	}
	mech, err := scram.Mechanism(algo, o.KafkaSASLUsername, password)
	if err != nil {
		// Not wrapped: the SCRAM library's error quotes the password.
		return nil, fmt.Errorf("--kafka-sasl-mechanism %s: the user name or the password has characters SCRAM does not allow (SASLprep: control or unassigned characters)", name)
	}
	return mech, nil
}

// kafkaSASLPassword is the password of the flag or of the file, without
// the file's line ending.
func (o kafkaSecurityOptions) kafkaSASLPassword() (string, error) {
	if o.KafkaSASLPasswordFile == "" {
		return o.KafkaSASLPassword, nil
	}
	if o.KafkaSASLPassword != "" {
		return "", errors.New("both --kafka-sasl-password (or WALRELAY_KAFKA_SASL_PASSWORD) and --kafka-sasl-password-file are set: set one")
	}
	p, err := secretfile.Read(o.KafkaSASLPasswordFile)
	if err != nil {
		return "", fmt.Errorf("--kafka-sasl-password-file (WALRELAY_KAFKA_SASL_PASSWORD_FILE): %w", err)
	}
	return p, nil
}

// kafkaSecurityWarning is what walrelay run warns about its Kafka
// security at start, or "" when there is nothing to say.
func kafkaSecurityWarning(tc *tls.Config, mech sasl.Mechanism) string {
	switch {
	case mech == nil || tc != nil:
		return ""
	case mech.Name() == saslPlain:
		return "SASL PLAIN without TLS: the SASL credentials travel in clear text; set --kafka-tls"
	default:
		return "SASL " + mech.Name() + " without TLS: the password is not sent, but all traffic to Kafka, messages included, is unencrypted; set --kafka-tls"
	}
}

// saslName is the mechanism's name for the start-up log; "none" for nil.
func saslName(mech sasl.Mechanism) string {
	if mech == nil {
		return "none"
	}
	return mech.Name()
}
