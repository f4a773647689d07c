package main

import (
	"regexp"
	"strings"
)

// secretValue is a flag holding a secret: a password, or a connection
// string that may carry one. -h shows show(value) as the default (nothing
// when show is nil), so a secret set through its WALRELAY_* variable is
// never printed.
type secretValue struct {
	p    *string
	show func(string) string
}

func (s *secretValue) Set(v string) error { *s.p = v; return nil }

func (s *secretValue) String() string {
	if s == nil || s.p == nil || s.show == nil || *s.p == "" {
		return ""
	}
	return s.show(*s.p)
}

// redactedPassword replaces a password wherever walrelay shows a connection
// string.
const redactedPassword = "xxxxx"

// kvPassword finds password and sslpassword in a keyword/value connection
// string: a quoted value (with \' and \\ escapes) or a bare one.
var kvPassword = regexp.MustCompile(`(?i)\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s]*)`)

// redactConnString is s without its passwords: the URL's user password and
// any password or sslpassword parameter, in URL or keyword/value form. The
// URL is split as mergeURL splits it (libpq's way), so multi-host URLs,
// which net/url refuses, are shown too.
func redactConnString(s string) string {
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
