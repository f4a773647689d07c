package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/slot"
)

// sslModes are libpq's values of sslmode, weakest first.
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// postgresConnString is --postgres-url with the --postgres-ssl* flags and the
// password of --postgres-password-file merged in; each set flag overrides
// the same parameter of the URL. Unset flags leave the URL as it is, so
// libpq's variables (PGSSLMODE, PGPASSWORD, PGPASSFILE, ...) keep working
// through pgconn wherever neither the URL nor a flag sets the parameter.
// The result holds the password: it goes to pgconn and nowhere else.
func (o options) postgresConnString() (string, error) {
	if o.PostgresURL == "" {
		return "", fmt.Errorf("--postgres-url (WALRELAY_POSTGRES_URL) is required")
	}
	params, err := o.Postgres.params()
	if err != nil {
		return "", err
	}
	return mergeConnString(o.PostgresURL, params)
}

// connParam is one libpq connection parameter.
type connParam struct{ key, value string }

// params are the connection parameters the flags set, the password (read
// from its file) last.
func (p postgresOptions) params() ([]connParam, error) {
	var out []connParam
	if p.SSLMode != "" {
		if !slices.Contains(sslModes, p.SSLMode) {
			return nil, fmt.Errorf("--postgres-sslmode (WALRELAY_POSTGRES_SSLMODE) is %q; want one of %s",
				p.SSLMode, strings.Join(sslModes, ", "))
		}
		out = append(out, connParam{"sslmode", p.SSLMode})
	}
	for _, c := range []connParam{{"sslrootcert", p.SSLRootCert}, {"sslcert", p.SSLCert}, {"sslkey", p.SSLKey}} {
		if c.value != "" {
			out = append(out, c)
		}
	}
	if p.PasswordFile != "" {
		pw, err := readPasswordFile(p.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("--postgres-password-file (WALRELAY_POSTGRES_PASSWORD_FILE): %w", err)
		}
		out = append(out, connParam{"password", pw})
	}
	return out, nil
}

// readPasswordFile returns the file's content without one trailing line
// break (\n, \r\n or \r). Its errors name the file, never the content.
func readPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err // *fs.PathError: the operation, the path and the reason
	}
	pw := strings.TrimSuffix(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	switch {
	case pw == "":
		return "", fmt.Errorf("%s holds no password", path)
	case strings.IndexByte(pw, 0) >= 0:
		return "", fmt.Errorf("%s holds a NUL byte, which no PostgreSQL password can", path)
	}
	return pw, nil
}

// mergeConnString sets params in a PostgreSQL connection string of either
// form, URL (postgres:// or postgresql://) or keyword/value, overriding what
// it says for the same keys.
func mergeConnString(base string, params []connParam) (string, error) {
	if len(params) == 0 {
		return base, nil
	}
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		return mergeURL(base, params), nil
	}
	return mergeKeywordValue(base, params)
}

// mergeKeywordValue appends key='value' for each param: pgconn (like libpq)
// keeps the last value of a repeated key. Inside quotes, only a backslash
// and a single quote need a backslash before them.
func mergeKeywordValue(base string, params []connParam) (string, error) {
	// An odd run of backslashes at the end would escape the space that
	// separates the first appended key.
	if n := len(base) - len(strings.TrimRight(base, `\`)); n%2 == 1 {
		return "", errors.New("--postgres-url ends with a lone backslash; remove it")
	}
	quote := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	var b strings.Builder
	b.WriteString(base)
	for _, p := range params {
		fmt.Fprintf(&b, " %s='%s'", p.key, quote.Replace(p.value))
	}
	return b.String(), nil
}

// mergeURL sets params in a connection URL: the password in the userinfo
// (after the user name as written), the others as query parameters, each
// replacing every earlier occurrence of its key. The rest of the URL is
// kept byte for byte.
//
// It splits the URL the way libpq and pgconn do rather than with net/url:
// url.Values.Encode writes a space as '+', which libpq reads as a plus sign
// (options=-c%20x would become options=-c+x), and url.Parse refuses some of
// libpq's multi-host URLs (postgres://h1:5432,h2/db). Values are
// percent-encoded in full, which libpq decodes everywhere.
func mergeURL(base string, params []connParam) string {
	i := strings.Index(base, "://") + len("://")
	scheme, rest := base[:i], base[i:]
	// libpq: the userinfo ends at the first '@' that comes before any '/'.
	var userinfo string
	hasUserinfo := false
	if j := strings.IndexAny(rest, "@/"); j >= 0 && rest[j] == '@' {
		userinfo, rest, hasUserinfo = rest[:j], rest[j+1:], true
	}
	var pairs []string
	if j := strings.IndexByte(rest, '?'); j >= 0 {
		pairs = strings.Split(rest[j+1:], "&")
		rest = rest[:j]
	}
	set := map[string]bool{}
	for _, p := range params {
		set[p.key] = true
	}
	if set["sslmode"] {
		set["ssl"] = true // pgconn reads ssl=true as sslmode=require
	}
	var query []string
	for _, pair := range pairs {
		if pair != "" && !set[queryKey(pair)] {
			query = append(query, pair)
		}
	}
	for _, p := range params {
		if p.key == "password" {
			user, _, _ := strings.Cut(userinfo, ":")
			userinfo, hasUserinfo = user+":"+uriEscape(p.value), true
			continue
		}
		query = append(query, p.key+"="+uriEscape(p.value))
	}
	var b strings.Builder
	b.WriteString(scheme)
	if hasUserinfo {
		b.WriteString(userinfo + "@")
	}
	b.WriteString(rest)
	if len(query) > 0 {
		b.WriteString("?" + strings.Join(query, "&"))
	}
	return b.String()
}

// queryKey is the decoded key of a query parameter, as libpq compares it.
func queryKey(pair string) string {
	raw, _, _ := strings.Cut(pair, "=")
	key, err := url.PathUnescape(raw) // no '+' for space, like libpq
	if err != nil {
		key = raw
	}
	return strings.Trim(key, " ")
}

// uriEscape percent-encodes every byte but RFC 3986's unreserved
// characters, so that the value means the same in the userinfo and in the
// query, to libpq and to pgconn.
func uriEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// warnPostgresTLS logs one warning when the connection to PostgreSQL is not
// verified TLS: with anything less than sslmode=verify-full, someone on the
// network path can read or alter the stream, or pose as the server. Unix
// sockets need no TLS.
func warnPostgresTLS(log *zap.Logger, connString string) error {
	state, err := slot.TLSVerification(connString)
	if err != nil {
		return err
	}
	if !state.OK() {
		log.Warn("the connection to PostgreSQL is not verified TLS", zap.Stringer("postgres_tls", state),
			zap.String("risk", state.Describe()), zap.String("fix", slot.TLSFix))
	}
	return nil
}
