package schema

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxIdentifierLen is PostgreSQL's NAMEDATALEN-1.
const maxIdentifierLen = 63

// ValidateIdentifier accepts any name PostgreSQL keeps as it is when it is
// quoted: not empty, valid UTF-8, no NUL byte, at most 63 bytes (a longer
// name PostgreSQL cuts to 63, so that walrelay would look for another
// object than the one it created). Spaces, dashes, quotes and semicolons
// are all allowed: every name walrelay writes into SQL goes through
// QuoteIdentifier, or QuoteLiteral where SQL wants it as a string, or is
// a parameter, so that no name can change the meaning of a command.
func ValidateIdentifier(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty", kind)
	case len(name) > maxIdentifierLen:
		return fmt.Errorf("%s name %q is %d bytes, longer than PostgreSQL's %d", kind, name, len(name), maxIdentifierLen)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%s name %q holds a NUL byte, which PostgreSQL does not allow", kind, name)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s name %q is not valid UTF-8", kind, name)
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

// QuoteIdentifier double-quotes a validated identifier for SQL, doubling
// the double quotes it holds: PostgreSQL then reads it back exactly,
// whatever else it holds.
func QuoteIdentifier(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// QuoteLiteral single-quotes s as a SQL string literal, doubling the single
// quotes it holds. A backslash makes it an escape string (E'...') with the
// backslashes doubled, which reads the same whatever
// standard_conforming_strings is (as PostgreSQL's quote_literal does).
func QuoteLiteral(s string) string {
	if strings.Contains(s, `\`) {
		return "E" + QuoteCommandString(strings.ReplaceAll(s, `\`, `\\`))
	}
	return QuoteCommandString(s)
}

// QuoteCommandString single-quotes s for a replication command
// (START_REPLICATION's publication_names '...'), whose strings know no
// backslash escapes and no E'...': the single quotes doubled, nothing else.
func QuoteCommandString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// Table is a schema-qualified table name, each part exactly as PostgreSQL
// stores it (no quotes, no case folding).
type Table struct {
	Schema string
	Name   string
}

// ParseTable reads "name" or "schema.name" (schema defaults to public) and
// validates both parts. A part may be written in double quotes, the way
// SQL writes a name, with a double quote inside doubled: "Sales-App"."Outbox
// Events", "my.schema".t, "a""b". An unquoted part is taken exactly as
// written, up to the dot: walrelay does not fold it to lower case as SQL
// does, so Outbox names the table "Outbox", and Sales-App.Outbox Events
// works unquoted too. An unquoted part may hold neither a dot nor a double
// quote.
func ParseTable(s string) (Table, error) {
	parts, err := splitName(s)
	if err != nil {
		return Table{}, fmt.Errorf("table %q: %w", s, err)
	}
	var t Table
	switch len(parts) {
	case 1:
		t = Table{Schema: "public", Name: parts[0]}
	case 2:
		t = Table{Schema: parts[0], Name: parts[1]}
	default:
		return Table{}, fmt.Errorf("table %q: want name or schema.name, got %d dotted parts (quote a name that holds a dot: \"my.schema\".t)", s, len(parts))
	}
	if err := t.Validate("table"); err != nil {
		return Table{}, err
	}
	return t, nil
}

// splitName splits s at the dots outside double quotes and unquotes each
// part.
func splitName(s string) ([]string, error) {
	var parts []string
	for {
		part, rest, err := nextPart(s)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
		if rest == "" {
			return parts, nil
		}
		s = rest[1:] // past the dot
		if s == "" {
			return nil, errors.New("ends with a dot")
		}
	}
}

// nextPart reads one part of a dotted name; rest is "" or starts with the
// dot after it.
func nextPart(s string) (part, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		part, rest = s, ""
		if i := strings.IndexByte(s, '.'); i >= 0 {
			part, rest = s[:i], s[i:]
		}
		if strings.Contains(part, `"`) {
			return "", "", fmt.Errorf("part %q holds a double quote: quote the whole part and double the quote (%s)", part, QuoteIdentifier(part))
		}
		return part, rest, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			b.WriteByte('"')
			i++
			continue
		}
		rest = s[i+1:]
		if rest != "" && rest[0] != '.' {
			return "", "", fmt.Errorf("want a dot or the end after the quoted part %s, got %q", s[:i+1], rest)
		}
		return b.String(), rest, nil
	}
	return "", "", fmt.Errorf("the quoted part %s has no closing double quote", s)
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

// String is the form ParseTable reads, for messages: schema.name, each
// part double-quoted when it is not a plain name (letters, digits, '_' and
// '$', not starting with a digit), so that "Sales-App"."Outbox Events"
// reads as two names. public.outbox stays public.outbox.
func (t Table) String() string { return displayName(t.Schema) + "." + displayName(t.Name) }

// Quoted is the form for SQL: "schema"."name".
func (t Table) Quoted() string { return QuoteIdentifier(t.Schema) + "." + QuoteIdentifier(t.Name) }

// displayName is name as it is when plain, else quoted.
func displayName(name string) string {
	if isPlain(name) {
		return name
	}
	return QuoteIdentifier(name)
}

// isPlain says whether name is letters, digits, '_' and '$', starting with
// a letter or '_' (ASCII only).
func isPlain(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '$'):
		default:
			return false
		}
	}
	return name != ""
}
