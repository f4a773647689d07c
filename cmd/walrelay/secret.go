package main

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
