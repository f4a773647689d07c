package main

import (
	"net/url"
	"os"
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

// secret binds a flag holding a password: its variable sets it, and neither
// the variable's value nor the flag's is shown anywhere.
func (f *flags) secret(p *string, name, help string) {
	f.secretShown(p, name, help, nil)
}

// secretShown binds a flag whose value may hold a secret: -h shows it as
// show makes it (for a URL, without its password).
func (f *flags) secretShown(p *string, name, help string, show func(string) string) {
	*p = os.Getenv(envName(name))
	f.fs.Var(&secretValue{p: p, show: show}, name, help+" ("+envName(name)+")")
}

// redactedPassword replaces a password wherever walrelay shows a connection
// string.
const redactedPassword = "xxxxx"

// kvPassword finds password and sslpassword in a keyword/value connection
// string: a quoted value (with \' and \\ escapes) or a bare one.
var kvPassword = regexp.MustCompile(`(?i)\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s]*)`)

// redactConnString is s without its passwords: the URL's user password and
// any password or sslpassword parameter, in URL or keyword/value form. A
// URL that does not parse is not shown at all.
func redactConnString(s string) string {
	if !strings.HasPrefix(s, "postgres://") && !strings.HasPrefix(s, "postgresql://") {
		return kvPassword.ReplaceAllString(s, "${1}="+redactedPassword)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse; not shown)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), redactedPassword)
	}
	q := u.Query()
	for k := range q {
		if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
			q.Set(k, redactedPassword)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
