package testkit

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

// A certificate the CA issued carries a TLS handshake to its hosts for a
// client that trusts the CA file, and fails one that trusts another CA.
func TestCAIssueHandshake(t *testing.T) {
	ca := NewCA(t)
	certFile, keyFile := ca.Issue(t, "server", "127.0.0.1", "localhost")
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %s: got %v, %v; want mode 0600", keyFile, fi, err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	Must(t, err, "load the issued pair")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	Must(t, err, "listen")
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake() //nolint:errcheck // the client's side is checked
			c.Close()
		}
	}()
	dial := func(roots *x509.CertPool, serverName string) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: serverName})
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if err := dial(pool(t, ca.File()), name); err != nil {
			t.Errorf("handshake as %s with the CA: got %v; want success", name, err)
		}
	}
	if err := dial(pool(t, ca.File()), "elsewhere.invalid"); err == nil {
		t.Errorf("handshake as elsewhere.invalid: got success; want a name mismatch")
	}
	if err := dial(pool(t, NewCA(t).File()), "localhost"); err == nil {
		t.Errorf("handshake trusting another CA: got success; want an unknown authority")
	}
}

// A client certificate without hosts is valid for client authentication.
func TestCAIssueClient(t *testing.T) {
	ca := NewCA(t)
	certFile, keyFile := ca.Issue(t, "walrelay")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	Must(t, err, "load the issued pair")
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	Must(t, err, "parse")
	if leaf.Subject.CommonName != "walrelay" {
		t.Errorf("common name: got %q; want walrelay", leaf.Subject.CommonName)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool(t, ca.File()), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Errorf("verify as a client certificate: got %v; want success", err)
	}
}

func pool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(file)
	Must(t, err, "read %s", file)
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatalf("%s: got no certificate; want one", file)
	}
	return p
}
