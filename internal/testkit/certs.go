package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test, for TLS between walrelay
// and PostgreSQL or Kafka. Its certificate and the certificates it issues
// are PEM files in the test's temporary directory, removed with it. Keys
// are ECDSA P-256, written unencrypted as PKCS#8 ("PRIVATE KEY", mode 0600),
// which Go's crypto/tls, OpenSSL (PostgreSQL) and Kafka's PEM key store all
// read. Certificates are valid from an hour ago for a day.
type CA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

// NewCA makes a CA of its own: two NewCA calls give CAs that do not trust
// each other's certificates.
func NewCA(t *testing.T) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(t),
		Subject:               pkix.Name{CommonName: "walrelay test CA " + t.Name()},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Must(t, err, "create the CA certificate")
	cert, err := x509.ParseCertificate(der)
	Must(t, err, "parse the CA certificate")
	ca := &CA{dir: t.TempDir(), cert: cert, key: key}
	ca.file = filepath.Join(ca.dir, "ca.crt")
	writePEM(t, ca.file, "CERTIFICATE", der, 0o644)
	return ca
}

// File is the path of the CA's certificate (PEM): the trust anchor for
// clients and servers.
func (ca *CA) File() string { return ca.file }

// Issue makes a certificate for commonName, signed by the CA, for server
// and client authentication, and returns the PEM files of the certificate
// and of its private key. hosts are its subject alternative names: an IP
// address becomes an IP SAN, anything else a DNS name. A client
// certificate needs none (PostgreSQL and Kafka read the user from
// commonName).
func (ca *CA) Issue(t *testing.T, commonName string, hosts ...string) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	serial := newSerial(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	Must(t, err, "issue a certificate for %q", commonName)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	Must(t, err, "encode the key of %q", commonName)
	name := serial.Text(16)
	certFile, keyFile = filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der, 0o644)
	writePEM(t, keyFile, "PRIVATE KEY", pkcs8, 0o600)
	return certFile, keyFile
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Must(t, err, "generate a key")
	return key
}

// newSerial is a random positive serial number of up to 120 bits: unique,
// so it also names the files of a certificate.
func newSerial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	Must(t, err, "make a serial number")
	return n.Add(n, big.NewInt(1))
}

func writePEM(t *testing.T, path, blockType string, der []byte, mode os.FileMode) {
	t.Helper()
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	Must(t, os.WriteFile(path, data, mode), "write %s", path)
}
