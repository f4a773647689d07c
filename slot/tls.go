package slot

import (
	"crypto/tls"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/check"
)

// TLSState is how well a connection string protects the connection to
// PostgreSQL: whether it is always encrypted, and whether walrelay checks
// that it talks to the server it named. The states are ordered from the
// weakest; a connection string with several hosts has the state of its
// weakest host.
type TLSState int

const (
	// TLSPlain: a connection may be made without TLS. sslmode=disable never
	// encrypts; allow and prefer (libpq's default) fall back to plain text
	// when TLS fails, which anyone on the network path can arrange.
	TLSPlain TLSState = iota
	// TLSUnverified: always encrypted, but any certificate is accepted
	// (sslmode=require without sslrootcert), so anyone on the network path
	// can pose as the server.
	TLSUnverified
	// TLSVerifyCA: the certificate is checked against sslrootcert, but not
	// the host name (sslmode=verify-ca, or require with sslrootcert): any
	// server holding a certificate of that CA can pose as this one.
	TLSVerifyCA
	// TLSVerifyFull: the certificate is checked against sslrootcert and
	// names the host (sslmode=verify-full, or sslrootcert=system).
	TLSVerifyFull
	// TLSSocket: every host is a Unix socket, which no network carries;
	// libpq and pgconn use no TLS there.
	TLSSocket
)

var tlsStateNames = [...]string{
	TLSPlain:      "plain",
	TLSUnverified: "unverified",
	TLSVerifyCA:   "verify-ca",
	TLSVerifyFull: "verify-full",
	TLSSocket:     "unix-socket",
}

// String is a short name: plain, unverified, verify-ca, verify-full or
// unix-socket.
func (s TLSState) String() string {
	if s < 0 || int(s) >= len(tlsStateNames) {
		return fmt.Sprintf("TLSState(%d)", int(s))
	}
	return tlsStateNames[s]
}

// OK reports whether there is nothing to warn about: verify-full, or Unix
// sockets only.
func (s TLSState) OK() bool { return s == TLSVerifyFull || s == TLSSocket }

// Describe says in a sentence what the state means for the connection.
func (s TLSState) Describe() string {
	switch s {
	case TLSPlain:
		return "plain text possible: sslmode disable never encrypts, and allow or prefer (the default) fall back to plain text, which anyone on the network path can read and alter"
	case TLSUnverified:
		return "encrypted, but the server is not verified (sslmode=require without sslrootcert): anyone on the network path can pose as the server"
	case TLSVerifyCA:
		return "encrypted, the certificate is checked against sslrootcert but not the host name (verify-ca): any server with a certificate of that CA can pose as this one"
	case TLSVerifyFull:
		return "encrypted and verified: the certificate is checked against sslrootcert and names the host (verify-full)"
	case TLSSocket:
		return "Unix socket: no network, no TLS needed"
	}
	return s.String()
}

// TLSFix is what to change when the state is not OK.
const TLSFix = "Use sslmode=verify-full with sslrootcert=<the CA certificate that signed the server's> " +
	"(" + SettingSSLMode + " verify-full " + SettingSSLRootCert + " /path/to/ca.pem), the host named as in the server's certificate."

// sslSettings are the ConnParams that set TLS.
const sslSettings = SettingSSLMode + ", " + SettingSSLRootCert + ", " + SettingSSLCert + " and " + SettingSSLKey

// WarnUnverifiedTLS logs one warning when the connection connString makes
// is not verified TLS: with anything less than sslmode=verify-full, someone
// on the network path can read or alter the stream, or pose as the server.
// Unix sockets need no TLS. It refuses nothing: a loopback or trusted
// network may be a deliberate choice.
func WarnUnverifiedTLS(log *zap.Logger, connString string) error {
	state, err := TLSVerification(connString)
	if err != nil {
		return err
	}
	if !state.OK() {
		log.Warn("the connection to PostgreSQL is not verified TLS", zap.Stringer("postgres_tls", state),
			zap.String("risk", state.Describe()), zap.String("fix", TLSFix))
	}
	return nil
}

// TLSVerification parses connString as pgconn does (libpq's PG* variables
// included) and classifies it. It reads the files the string names
// (sslrootcert, sslcert, sslkey) but connects to nothing.
func TLSVerification(connString string) (TLSState, error) {
	pc, err := pgconn.ParseConfig(connString)
	if err != nil {
		return TLSPlain, ParseError(err)
	}
	return configTLS(pc), nil
}

// configTLS classifies a parsed configuration by the TLS configuration of
// each host pgconn may try: the main one and its fallbacks, which is how
// pgconn implements allow and prefer (a nil TLSConfig is a plain attempt).
func configTLS(pc *pgconn.Config) TLSState {
	state := hostTLS(pc.Host, pc.Port, pc.TLSConfig)
	for _, fb := range pc.Fallbacks {
		state = min(state, hostTLS(fb.Host, fb.Port, fb.TLSConfig))
	}
	return state
}

// hostTLS classifies one connection attempt by the tls.Config pgconn built
// for it: verify-full leaves Go's own verification (chain and name) on;
// verify-ca turns it off and checks the chain in VerifyPeerCertificate;
// require turns it off with nothing in its place.
func hostTLS(host string, port uint16, tc *tls.Config) TLSState {
	switch network, _ := pgconn.NetworkAddress(host, port); {
	case network == "unix":
		return TLSSocket
	case tc == nil:
		return TLSPlain
	case !tc.InsecureSkipVerify:
		return TLSVerifyFull
	case tc.VerifyPeerCertificate != nil:
		return TLSVerifyCA
	}
	return TLSUnverified
}

// tlsResult is the "postgres tls" check of connString, whose connection
// conn is: OK when verified (or a Unix socket), a warning with the fix
// otherwise. The found text says whether conn itself is encrypted.
func tlsResult(connString string, conn *pgconn.PgConn) check.Result {
	const name = "postgres tls"
	state, err := TLSVerification(connString)
	if err != nil {
		return check.Failure(name, err.Error(), "Correct the TLS settings of "+SettingConnString+" and "+sslSettings+".")
	}
	found := state.Describe()
	if tc, ok := conn.Conn().(*tls.Conn); ok {
		found += "; this connection: " + tls.VersionName(tc.ConnectionState().Version)
	} else if state != TLSSocket {
		found += "; this connection is not encrypted"
	}
	if state.OK() {
		return check.Pass(name, found)
	}
	return check.Warning(name, found, TLSFix)
}
