package configfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// keys is a verb's keys as a test's Check sees them: slot and
// postgres-url at the top, table and column-payload in a table, message-id
// command line only.
var keys = Keys{
	Verb:     "walrelay run",
	Top:      func(k string) bool { return k == "slot" || k == "postgres-url" },
	Table:    func(k string) bool { return k == "table" || k == "column-payload" },
	FlagOnly: func(k string) bool { return k == "message-id" },
}

func TestParseTopLevelAndTables(t *testing.T) {
	f, err := Parse("walrelay.yaml", []byte(`# two tables through one slot
postgres-url: "postgres://walrelay@db/app"
slot: walrelay
tables:
  - table: public.outbox_messages
  - table: billing.OutboxMessages
    column-payload: Payload
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if v, ok := f.Lookup("postgres-url"); !ok || v != "postgres://walrelay@db/app" {
		t.Errorf("postgres-url: %q, %v; want the URL", v, ok)
	}
	if _, ok := f.Lookup("kafka-brokers"); ok {
		t.Errorf("kafka-brokers: found; want absent")
	}
	if got := f.Top.Keys(); !slices.Equal(got, []string{"postgres-url", "slot"}) {
		t.Errorf("top keys %v; want postgres-url, slot (tables: apart)", got)
	}
	if len(f.Tables) != 2 {
		t.Fatalf("tables: %d; want 2", len(f.Tables))
	}
	v, _ := f.Tables[1].Get("column-payload")
	if tb, _ := f.Tables[1].Get("table"); tb.Text != "billing.OutboxMessages" || tb.Line != 6 || v.Text != "Payload" || v.Line != 7 {
		t.Errorf("second table: %+v, %+v; want billing.OutboxMessages on line 6 and Payload on line 7", tb, v)
	}
	if err := f.Check(keys); err != nil {
		t.Errorf("Check: %v; want nil", err)
	}
	// Values stay text, as on a command line: numbers and booleans too.
	f, err = Parse("w.yaml", []byte("slot: 10\npostgres-url: true\n"))
	if err != nil || must(f.Lookup("slot")) != "10" || must(f.Lookup("postgres-url")) != "true" {
		t.Errorf("scalars: %v, %v; want their text", f, err)
	}
}

func must(s string, _ bool) string { return s }

func TestEmptyFileHasNoKeys(t *testing.T) {
	for _, data := range []string{"", "# nothing yet\n"} {
		f, err := Parse("w.yaml", []byte(data))
		if err != nil || len(f.Top.Keys()) != 0 || f.Tables != nil {
			t.Errorf("Parse(%q): %+v, %v; want no keys and no tables", data, f, err)
		}
	}
}

// Each malformed or wrong file is refused with its line and what to do.
func TestRefusedWithTheLine(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       string // file:line: and the message's start
	}{
		{"unknown key", "slot: a\nslott: b\n", "w.yaml:2: slott is not a setting of walrelay run (walrelay run -h lists them)"},
		{"dashes", "--slot: a\n", "w.yaml:1: --slot: a key is a flag's name without the dashes: slot"},
		{"given twice", "slot: a\nslot: b\n", "w.yaml:2: slot is given twice"},
		{"a list value", "slot:\n  - a\n  - b\n", "w.yaml:2: slot: want one value"},
		{"no value", "slot:\n", "w.yaml:1: slot: no value"},
		{"flag only", "message-id: 7\n", "w.yaml:1: message-id is given on the command line only (--message-id)"},
		{"table setting at the top with tables", "column-payload: p\ntables:\n  - table: a\n", "w.yaml:1: column-payload is a table's setting: with a tables: list"},
		{"top setting in a table", "tables:\n  - table: a\n    slot: s\n", "w.yaml:3: slot is not a table's setting: give it once, at the top level"},
		{"unknown in a table", "tables:\n  - table: a\n    colum-payload: p\n", "w.yaml:3: colum-payload is not a table's setting of walrelay run"},
		{"table without its name", "tables:\n  - column-payload: p\n", "w.yaml:2: a table's entry without table:"},
		{"tables not a list", "tables:\n  table: a\n", "w.yaml:2: tables: want a list of tables"},
		{"a table not a mapping", "tables:\n  - public.outbox\n", "w.yaml:2: a table: want keys and values"},
		{"tables twice", "tables: []\ntables: []\n", "w.yaml:2: tables is given twice"},
		{"not a mapping", "- slot\n", "w.yaml:1: the file: want keys and values"},
		{"two documents", "slot: a\n---\nslot: b\n", "w.yaml:2: a second YAML document"},
		{"bad YAML", "slot: [a\n", "w.yaml: line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("w.yaml", []byte(tc.data))
			if err == nil {
				err = f.Check(keys)
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got %v; want an error starting %q", err, tc.want)
			}
			var fe *Error
			if tc.name != "bad YAML" && !errors.As(err, &fe) {
				t.Errorf("error %T; want *Error with the line", err)
			}
		})
	}
}

func TestReadNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "walrelay.yaml")
	if _, err := Read(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("Read of a missing file: %v; want an error naming it", err)
	}
	if err := os.WriteFile(p, []byte("slot: s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Read(p)
	if err != nil || must(f.Lookup("slot")) != "s" || f.Path != p {
		t.Errorf("Read: %+v, %v; want slot s", f, err)
	}
}

func TestNilFileLooksUpNothing(t *testing.T) {
	var f *File
	if _, ok := f.Lookup("slot"); ok {
		t.Errorf("nil file: found slot; want nothing")
	}
}
