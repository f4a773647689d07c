package slot

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/walrelay/walrelay/internal/secretfile"
)

// ConnParams are libpq connection parameters set beside a connection
// string, each overriding the same parameter of the string. Empty means
// unset: the string's own setting, or libpq's variable (PGSSLMODE,
// PGPASSWORD, PGPASSFILE, ...), read by pgconn, stays in effect.
type ConnParams struct {
	// SSLMode is libpq's sslmode: disable, allow, prefer, require,
	// verify-ca or verify-full.
	SSLMode string
	// SSLRootCert, SSLCert and SSLKey are libpq's files of the same names.
	SSLRootCert, SSLCert, SSLKey string
	// PasswordFile is a file holding the password (secretfile.Read).
	PasswordFile string
}

// The settings of ConnParams, as errors and fixes name them.
const (
	SettingSSLMode      = "slot.ConnParams.SSLMode"
	SettingSSLRootCert  = "slot.ConnParams.SSLRootCert"
	SettingSSLCert      = "slot.ConnParams.SSLCert"
	SettingSSLKey       = "slot.ConnParams.SSLKey"
	SettingPasswordFile = "slot.ConnParams.PasswordFile"
)

// sslModes are libpq's values of sslmode, weakest first.
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// Apply returns connString, a URL (postgres:// or postgresql://) or a
// keyword/value string, with the set parameters merged in and the password
// read from PasswordFile. The result holds the password: it is for pgconn
// (Config.ConnString) and nothing else.
func (p ConnParams) Apply(connString string) (string, error) {
	params, err := p.params()
	if err != nil {
		return "", err
	}
	return mergeConnString(connString, params)
}

// connParam is one libpq connection parameter.
type connParam struct{ key, value string }

// params are the parameters p sets, the password last.
func (p ConnParams) params() ([]connParam, error) {
	var out []connParam
	if p.SSLMode != "" {
		if !slices.Contains(sslModes, p.SSLMode) {
			return nil, fmt.Errorf("%s is %q; want one of %s", SettingSSLMode, p.SSLMode, strings.Join(sslModes, ", "))
		}
		out = append(out, connParam{"sslmode", p.SSLMode})
	}
	for _, c := range []connParam{{"sslrootcert", p.SSLRootCert}, {"sslcert", p.SSLCert}, {"sslkey", p.SSLKey}} {
		if c.value != "" {
			out = append(out, c)
		}
	}
	if p.PasswordFile != "" {
		pw, err := secretfile.Read(p.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SettingPasswordFile, err)
		}
		out = append(out, connParam{"password", pw})
	}
	return out, nil
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
		return "", errors.New(SettingConnString + " ends with a lone backslash; remove it")
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

// redactedPassword replaces a password wherever walrelay shows a connection
// string.
const redactedPassword = "xxxxx"

// kvPassword finds password and sslpassword in a keyword/value connection
// string: a quoted value (with \' and \\ escapes) or a bare one.
var kvPassword = regexp.MustCompile(`(?i)\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s]*)`)

// RedactConnString is s without its passwords: the URL's user password and
// any password or sslpassword parameter, in URL or keyword/value form. The
// URL is split as mergeURL splits it (libpq's way), so multi-host URLs,
// which net/url refuses, are shown too.
func RedactConnString(s string) string {
	if !strings.HasPrefix(s, "postgres://") && !strings.HasPrefix(s, "postgresql://") {
		return kvPassword.ReplaceAllString(s, "${1}="+redactedPassword)
	}
	i := strings.Index(s, "://") + len("://")
	scheme, rest := s[:i], s[i:]
	if j := strings.IndexAny(rest, "@/"); j >= 0 && rest[j] == '@' {
		if user, _, hasPassword := strings.Cut(rest[:j], ":"); hasPassword {
			rest = user + ":" + redactedPassword + rest[j:]
		}
	}
	if j := strings.IndexByte(rest, '?'); j >= 0 {
		pairs := strings.Split(rest[j+1:], "&")
		for k, pair := range pairs {
			if key := queryKey(pair); strings.EqualFold(key, "password") || strings.EqualFold(key, "sslpassword") {
				pairs[k] = key + "=" + redactedPassword
			}
		}
		rest = rest[:j+1] + strings.Join(pairs, "&")
	}
	return scheme + rest
}
