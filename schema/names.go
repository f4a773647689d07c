package schema

import (
	"fmt"
	"strings"
)

// maxIdentifierLen is PostgreSQL's NAMEDATALEN-1.
const maxIdentifierLen = 63

// ValidateIdentifier accepts a PostgreSQL identifier walrelay is willing to
// put into SQL and replication commands: a letter or underscore, then
// letters, digits, underscores or dollar signs, at most 63 bytes. Quotes,
// spaces, semicolons and other punctuation are refused rather than escaped,
// so that no name can change the meaning of a command.
func ValidateIdentifier(kind, name string) error {
	if name == "" {
		return fmt.Errorf("%s name is empty", kind)
	}
	if len(name) > maxIdentifierLen {
		return fmt.Errorf("%s name %q is longer than %d bytes", kind, name, maxIdentifierLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '$'):
		default:
			return fmt.Errorf("%s name %q: only letters, digits, '_' and '$' are allowed, starting with a letter or '_'", kind, name)
		}
	}
	return nil
}

// ValidateSlotName applies PostgreSQL's own rule for replication slot names:
// lower-case letters, digits and underscores, 1 to 63 of them.
func ValidateSlotName(name string) error {
	if name == "" || len(name) > maxIdentifierLen {
		return fmt.Errorf("slot name %q must be 1 to %d characters", name, maxIdentifierLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return fmt.Errorf("slot name %q: only lower-case letters, digits and '_' are allowed", name)
		}
	}
	return nil
}

// QuoteIdentifier double-quotes a validated identifier for SQL.
func QuoteIdentifier(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// Table is a schema-qualified table name.
type Table struct {
	Schema string
	Name   string
}

// ParseTable reads "name" or "schema.name" (schema defaults to public) and
// validates both parts.
func ParseTable(s string) (Table, error) {
	t := Table{Schema: "public", Name: s}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		t = Table{Schema: s[:i], Name: s[i+1:]}
	}
	if err := t.Validate("table"); err != nil {
		return Table{}, err
	}
	return t, nil
}

// Validate checks both parts of t with ValidateIdentifier, naming them
// "<kind> schema" and "<kind>" in the error: one rule for every table
// walrelay and its libraries put into SQL.
func (t Table) Validate(kind string) error {
	if err := ValidateIdentifier(kind+" schema", t.Schema); err != nil {
		return err
	}
	return ValidateIdentifier(kind, t.Name)
}

// String is the unquoted "schema.name" form.
func (t Table) String() string { return t.Schema + "." + t.Name }

// Quoted is the form for SQL: "schema"."name".
func (t Table) Quoted() string { return QuoteIdentifier(t.Schema) + "." + QuoteIdentifier(t.Name) }
