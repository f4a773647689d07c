package kafkasec

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

// Config is what walrelay's flags say of TLS and SASL towards Kafka; the
// zero value is neither. Each field is the flag named beside it.
type Config struct {
	TLS              bool   // --kafka-tls; any of the three files turns TLS on too
	CAFile           string // --kafka-tls-ca-file: replaces the system's roots
	CertFile         string // --kafka-tls-cert-file: needs KeyFile
	KeyFile          string // --kafka-tls-key-file
	ServerName       string // --kafka-tls-server-name: needs TLS
	SASLMechanism    string // --kafka-sasl-mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, any case; empty: no SASL
	SASLUsername     string // --kafka-sasl-username
	SASLPassword     string // --kafka-sasl-password; never logged, printed or put into an error
	SASLPasswordFile string // --kafka-sasl-password-file: instead of SASLPassword (secretfile.Read)
}

// Build returns the TLS configuration and the SASL mechanism c asks for,
// nil for what it does not ask, reading the files it names. Both are nil
// with an error, which names the flag and never holds the password.
func (c Config) Build() (*tls.Config, sasl.Mechanism, error) {
	tc, err := c.TLSConfig()
	if err != nil {
		return nil, nil, err
	}
	mech, err := c.Mechanism()
	if err != nil {
		return nil, nil, err
	}
	return tc, mech, nil
}

// TLSConfig is the TLS configuration of c (at least TLS 1.2, verified), or
// nil without TLS.
func (c Config) TLSConfig() (*tls.Config, error) {
	files := c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
	if !c.TLS && !files {
		if c.ServerName != "" {
			return nil, errors.New("--kafka-tls-server-name is set but TLS is off: set --kafka-tls (WALRELAY_KAFKA_TLS=true) too")
		}
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pool, err := readCABundle(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--kafka-tls-ca-file: %w", err)
		}
		tc.RootCAs = pool
	}
	switch {
	case (c.CertFile == "") != (c.KeyFile == ""):
		return nil, errors.New("--kafka-tls-cert-file and --kafka-tls-key-file go together: set both for a client certificate, or neither")
	case c.CertFile != "":
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--kafka-tls-cert-file %s with --kafka-tls-key-file %s: %w", c.CertFile, c.KeyFile, err)
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

// Mechanism is the SASL mechanism of c, or nil without SASL.
func (c Config) Mechanism() (sasl.Mechanism, error) {
	name := strings.ToUpper(strings.TrimSpace(c.SASLMechanism))
	credentials := c.SASLUsername != "" || c.SASLPassword != "" || c.SASLPasswordFile != ""
	if name == "" {
		if credentials {
			return nil, errors.New("--kafka-sasl-username or a password is set but --kafka-sasl-mechanism is empty: set it to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
		return nil, nil
	}
	if name != saslPlain && name != saslSCRAMSHA256 && name != saslSCRAMSHA512 {
		return nil, fmt.Errorf("--kafka-sasl-mechanism (WALRELAY_KAFKA_SASL_MECHANISM) is %q; want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (or empty for no SASL)", c.SASLMechanism)
	}
	password, err := c.password()
	if err != nil {
		return nil, err
	}
	if c.SASLUsername == "" || password == "" {
		return nil, fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-username and a password (--kafka-sasl-password, WALRELAY_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file)", name)
	}
	if name == saslPlain {
		return plain.Mechanism{Username: c.SASLUsername, Password: password}, nil
	}
	algo := scram.SHA512
	if name == saslSCRAMSHA256 {
		algo = scram.SHA256
	}
	mech, err := scram.Mechanism(algo, c.SASLUsername, password)
	if err != nil {
		// Not wrapped: the SCRAM library's error quotes the password.
		return nil, fmt.Errorf("--kafka-sasl-mechanism %s: the user name or the password has characters SCRAM does not allow (SASLprep: control or unassigned characters)", name)
	}
	return mech, nil
}

// password is the password of the flag or of the file, without the file's
// line ending.
func (c Config) password() (string, error) {
	if c.SASLPasswordFile == "" {
		return c.SASLPassword, nil
	}
	if c.SASLPassword != "" {
		return "", errors.New("both --kafka-sasl-password (or WALRELAY_KAFKA_SASL_PASSWORD) and --kafka-sasl-password-file are set: set one")
	}
	p, err := secretfile.Read(c.SASLPasswordFile)
	if err != nil {
		return "", fmt.Errorf("--kafka-sasl-password-file (WALRELAY_KAFKA_SASL_PASSWORD_FILE): %w", err)
	}
	return p, nil
}

// Warning is what walrelay run warns about its Kafka security at start, or
// "" when there is nothing to say: SASL without TLS.
func Warning(tc *tls.Config, mech sasl.Mechanism) string {
	switch {
	case mech == nil || tc != nil:
		return ""
	case mech.Name() == saslPlain:
		return "SASL PLAIN without TLS: the SASL credentials travel in clear text; set --kafka-tls"
	default:
		return "SASL " + mech.Name() + " without TLS: the password is not sent, but all traffic to Kafka, messages included, is unencrypted; set --kafka-tls"
	}
}

// MechanismName is the mechanism's name for the start-up log; "none" for
// nil.
func MechanismName(mech sasl.Mechanism) string {
	if mech == nil {
		return "none"
	}
	return mech.Name()
}
