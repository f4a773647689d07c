package schema

import (
	"regexp"
	"strings"
	"testing"
)

// hostileNames are legal PostgreSQL names that would change a command's
// meaning if one reached SQL unquoted: each ends a quoted identifier, a
// string literal, a dollar-quoted body or a comment.
var hostileNames = []string{
	`x"; DROP TABLE t; --`,
	`x'); DROP TABLE t; --`,
	`x$walrelay$; DROP TABLE t; --`,
	"x\nDROP TABLE t; --",
	"x\r; DROP TABLE t",
	`x\'; DROP TABLE t; --`,
	"x y", "x;y", "Sales-App", `"`, `''`, "ünïcödé ✓", "a.b",
}

func TestValidateIdentifier(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"outbox_messages", true},
		{"Outbox$2", true},
		{"1abc", true},
		{`x"y`, true},
		{"x;drop table y", true},
		{"has space", true},
		{"it's", true},
		{"ünïcode", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("é", 31) + "a", true}, // 63 bytes
		{"", false},
		{"a\x00b", false},
		{"a\xffb", false},
		{strings.Repeat("a", 64), false},
		{strings.Repeat("é", 32), false}, // 64 bytes
	} {
		err := ValidateIdentifier("table", tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateIdentifier(%q) = %v; want ok=%v", tc.name, err, tc.ok)
		}
	}
	for _, name := range hostileNames {
		if err := ValidateIdentifier("table", name); err != nil {
			t.Errorf("ValidateIdentifier(%q) = %v; want it accepted (quoting makes it harmless)", name, err)
		}
	}
}

func TestParseTable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Table
	}{
		{"outbox", Table{"public", "outbox"}},
		{"app.outbox", Table{"app", "outbox"}},
		{"App.Outbox", Table{"App", "Outbox"}}, // no case folding
		{"Sales-App.Outbox Events", Table{"Sales-App", "Outbox Events"}},
		{`"Sales-App"."Outbox Events"`, Table{"Sales-App", "Outbox Events"}},
		{`"my.schema".t`, Table{"my.schema", "t"}},
		{`s."a.b"`, Table{"s", "a.b"}},
		{`"a""b"`, Table{"public", `a"b`}},
		{`""""."."`, Table{`"`, "."}},
		{"public.x; DROP", Table{"public", "x; DROP"}},
		{`"x""; DROP TABLE t; --"`, Table{"public", `x"; DROP TABLE t; --`}},
	} {
		got, err := ParseTable(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseTable(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
	for in, want := range map[string]string{
		"app.out.box":           "3 dotted parts",
		`"a"."b"."c"`:           "3 dotted parts",
		".outbox":               "table schema name is empty",
		"app.":                  "ends with a dot",
		`""`:                    "table name is empty",
		`"unclosed`:             "no closing double quote",
		`"a"b`:                  `want a dot or the end after the quoted part "a"`,
		`a"b`:                   `quote the whole part and double the quote ("a""b")`,
		"a.b\x00":               "NUL",
		strings.Repeat("t", 64): "longer than PostgreSQL's 63",
	} {
		if got, err := ParseTable(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTable(%q) = %#v, %v; want an error saying %q", in, got, err, want)
		}
	}
}

// String is for messages: plain names as they are, the others quoted, and
// ParseTable reads it back.
func TestTableStringRoundTrips(t *testing.T) {
	for tab, want := range map[Table]string{
		{"public", "outbox"}:           "public.outbox",
		{"App", "Outbox$1"}:            "App.Outbox$1",
		{"Sales-App", "Outbox Events"}: `"Sales-App"."Outbox Events"`,
		{"my.schema", "t"}:             `"my.schema".t`,
		{"public", `a"b`}:              `public."a""b"`,
		{"public", "1abc"}:             `public."1abc"`,
	} {
		got := tab.String()
		if got != want {
			t.Errorf("%#v.String() = %s; want %s", tab, got, want)
		}
		if back, err := ParseTable(got); err != nil || back != tab {
			t.Errorf("ParseTable(%s) = %#v, %v; want %#v back", got, back, err, tab)
		}
	}
	for _, name := range hostileNames {
		tab := Table{name, name}
		if back, err := ParseTable(tab.String()); err != nil || back != tab {
			t.Errorf("ParseTable(%s) = %#v, %v; want %#v back", tab, back, err, tab)
		}
	}
	if got := (Table{"app", "outbox"}).Quoted(); got != `"app"."outbox"` {
		t.Errorf("Quoted() = %s", got)
	}
}

func TestQuoting(t *testing.T) {
	for _, tc := range []struct{ in, ident, literal, command string }{
		{"plain", `"plain"`, `'plain'`, `'plain'`},
		{`a"b`, `"a""b"`, `'a"b'`, `'a"b'`},
		{"it's", `"it's"`, `'it''s'`, `'it''s'`},
		{`back\slash'`, `"back\slash'"`, `E'back\\slash'''`, `'back\slash'''`},
	} {
		if got := QuoteIdentifier(tc.in); got != tc.ident {
			t.Errorf("QuoteIdentifier(%q) = %s; want %s", tc.in, got, tc.ident)
		}
		if got := QuoteLiteral(tc.in); got != tc.literal {
			t.Errorf("QuoteLiteral(%q) = %s; want %s", tc.in, got, tc.literal)
		}
		if got := QuoteCommandString(tc.in); got != tc.command {
			t.Errorf("QuoteCommandString(%q) = %s; want %s", tc.in, got, tc.command)
		}
	}
}

// A hostile name reaches the DDL only in the forms that keep it a name:
// rendered with a hostile name in any one place, and its quoted forms
// then replaced by a plain name's, the DDL is exactly the plain name's.
// So nothing of the name is ever outside its quotes, literal or comment.
func TestHostileNamesOnlyAsQuotedNames(t *testing.T) {
	// Not a plain name, so that messages and comments quote it as they
	// quote the hostile ones.
	const plain = "some name"
	places := map[string]func(*Config, *string, string){
		"table":             func(c *Config, _ *string, n string) { c.Table.Name = n },
		"schema":            func(c *Config, _ *string, n string) { c.Table.Schema = n },
		"publication":       func(c *Config, _ *string, n string) { c.Publication = n },
		"dead-letter table": func(c *Config, _ *string, n string) { c.DeadLetters = Table{Name: n} },
		"aggregate_id":      func(c *Config, _ *string, n string) { c.Columns.AggregateID = n },
		"occurred_at":       func(c *Config, _ *string, n string) { c.Columns.OccurredAt = n },
		"role":              func(_ *Config, role *string, n string) { *role = n },
	}
	render := func(t *testing.T, set func(*Config, *string, string), name string) string {
		t.Helper()
		c, role := DefaultConfig(), "relay"
		set(&c, &role, name)
		ddl, err := DDL(c)
		if err != nil {
			t.Fatalf("DDL with %q: %v", name, err)
		}
		grants, err := GrantsSQL(c, role)
		if err != nil {
			t.Fatalf("GrantsSQL with %q: %v", name, err)
		}
		return ddl + grants
	}
	forms := func(name string) []string {
		var f []string
		for _, suffix := range []string{"_dead_letters_parked", "_dead_letters", "_recoveries", "_topics", "_occurred_at", "_parked", ""} {
			f = append(f, QuoteIdentifier(name+suffix))
		}
		return append(f, QuoteLiteral(name), commentName(name))
	}
	for place, set := range places {
		want := render(t, set, plain)
		for _, name := range hostileNames {
			got := render(t, set, name)
			var pairs []string
			for i, h := range forms(name) {
				pairs = append(pairs, h, forms(plain)[i])
			}
			tag := doTag.FindStringSubmatch(got)[1]
			_, body, _ := strings.Cut(got, "DO "+tag+"\n")
			if body, _, _ = strings.Cut(body, tag); !strings.HasSuffix(body, "    END IF;\nEND\n") {
				t.Errorf("%s %q: the DO body ends early, at a %s inside it:\n%s", place, name, tag, body)
			}
			pairs = append(pairs, tag, "$walrelay$")
			if shaped := strings.NewReplacer(pairs...).Replace(got); shaped != want {
				t.Errorf("%s %q: the DDL differs from a plain name's in more than the name's quoted forms:\n%s", place, name, got)
			}
		}
	}
}

var doTag = regexp.MustCompile(`\nDO (\$walrelay[0-9]*\$)\n`)

// The tables walrelay derives from the outbox table's name are refused
// when PostgreSQL would cut their names, saying which setting to shorten;
// index names are cut as PostgreSQL cuts them, at a character's start.
func TestDerivedNamesFit(t *testing.T) {
	c := DefaultConfig()
	c.Table.Name = strings.Repeat("t", 51) // + _dead_letters = 64
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "_dead_letters") || !strings.Contains(err.Error(), SettingTable) || !strings.Contains(err.Error(), SettingDeadLetters) {
		t.Errorf("a 64-byte dead-letter table name: %v; want it refused naming %s and %s", err, SettingTable, SettingDeadLetters)
	}
	c.Table.Name = strings.Repeat("t", 53) // + _recoveries = 64
	c.DeadLetters = Table{Name: "parked"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "_recoveries: shorten "+SettingTable) {
		t.Errorf("a 64-byte recoveries table name: %v; want it refused naming %s", err, SettingTable)
	}
	c.Table.Name = strings.Repeat("é", 26) // 52 bytes: + _occurred_at = 64
	c.DeadLetters = Table{Name: strings.Repeat("d", 60)}
	ddl, err := DDL(c)
	if err != nil {
		t.Fatalf("DDL with long index names: %v; want them cut", err)
	}
	for _, want := range []string{
		`CREATE INDEX IF NOT EXISTS "` + strings.Repeat("é", 26) + `_occurred_a" ON`,
		`CREATE INDEX IF NOT EXISTS "` + strings.Repeat("d", 60) + `_pa" ON`,
	} {
		if !strings.Contains(ddl, want) {
			t.Errorf("DDL lacks %s:\n%s", want, ddl)
		}
	}
	if got := fitName(strings.Repeat("a", 62) + "é_x"); got != strings.Repeat("a", 62) {
		t.Errorf("fitName cut inside a character: %q", got)
	}
}
