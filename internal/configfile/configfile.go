// Package configfile reads walrelay's config file (--config, YAML): its
// top-level keys are flag names without the dashes (postgres-url,
// kafka-brokers, slot, ...) and its tables: list holds one entry per
// outbox table, whose keys are the table-level flag names (table,
// column-*, topic-template, preset, ...).
//
// A file is read whole and judged before anything is done: a key that is
// no flag of the verb, a value that is not a scalar, a table listed twice
// are errors naming the file's line and what to change. Values stay text,
// as a flag's or a variable's would be: the flag set parses them, so a
// file's "10s" and a command line's --heartbeat-interval 10s are the same
// thing. Flags and variables win over the file's top-level keys.
//
// Internal: cmd/walrelay's.
package configfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// TablesKey is the key of the list of outbox tables.
const TablesKey = "tables"

// Value is one key's value as the file has it, with the line it is on.
type Value struct {
	Text string
	Line int
}

// Entry is the keys of one mapping (the top level, or one table), in the
// file's order.
type Entry struct {
	Line int
	keys []string
	vals map[string]Value
}

// Get returns the value of key and whether the entry has it.
func (e Entry) Get(key string) (Value, bool) {
	v, ok := e.vals[key]
	return v, ok
}

// Keys are the entry's keys in the file's order.
func (e Entry) Keys() []string { return slices.Clone(e.keys) }

// File is a config file read and checked for its shape.
type File struct {
	Path string
	Top  Entry
	// Tables are the entries of tables:, in the file's order; nil when the
	// file has no tables: key.
	Tables []Entry
}

// Read reads and parses the file at path.
func Read(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	return Parse(path, data)
}

// Parse parses data, the contents of the file at path (named in errors).
func Parse(path string, data []byte) (*File, error) {
	f := &File{Path: path}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return f, nil // an empty file: no keys
		}
		return nil, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, f.errorf(more.Line, "a second YAML document (---): the config file is one document")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	top, tables, err := f.entry(root, true)
	if err != nil {
		return nil, err
	}
	f.Top = top
	if tables == nil {
		return f, nil
	}
	if tables.Kind != yaml.SequenceNode {
		return nil, f.errorf(tables.Line, "%s: want a list of tables, one \"- table: schema.name\" entry each", TablesKey)
	}
	f.Tables = []Entry{}
	for _, n := range tables.Content {
		e, _, err := f.entry(n, false)
		if err != nil {
			return nil, err
		}
		f.Tables = append(f.Tables, e)
	}
	return f, nil
}

// entry reads a mapping of scalars; at the top level, the tables: key's
// node is returned beside it.
func (f *File) entry(n *yaml.Node, top bool) (Entry, *yaml.Node, error) {
	e := Entry{Line: n.Line, vals: map[string]Value{}}
	if n.Kind != yaml.MappingNode {
		what := "the file"
		if !top {
			what = "a table"
		}
		return e, nil, f.errorf(n.Line, "%s: want keys and values (key: value), got %s", what, kindName(n))
	}
	var tables *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if k.Kind != yaml.ScalarNode || key == "" {
			return e, nil, f.errorf(k.Line, "a key must be a flag's name, like slot or postgres-url")
		}
		if _, dup := e.vals[key]; dup || top && key == TablesKey && tables != nil {
			return e, nil, f.errorf(k.Line, "%s is given twice", key)
		}
		if top && key == TablesKey {
			tables = v
			continue
		}
		if strings.HasPrefix(key, "-") {
			return e, nil, f.errorf(k.Line, "%s: a key is a flag's name without the dashes: %s", key, strings.TrimLeft(key, "-"))
		}
		if v.Kind != yaml.ScalarNode {
			return e, nil, f.errorf(v.Line, "%s: want one value (text, a number or true/false), got %s", key, kindName(v))
		}
		if v.Tag == "!!null" {
			return e, nil, f.errorf(v.Line, "%s: no value; give one, or leave the key out", key)
		}
		e.keys = append(e.keys, key)
		e.vals[key] = Value{Text: v.Value, Line: v.Line}
	}
	return e, tables, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "keys and values"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a single value"
}

// Error is a problem at a line of the file.
type Error struct {
	Path string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg) }

func (f *File) errorf(line int, format string, args ...any) error {
	return &Error{Path: f.Path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Keys says which keys a verb takes: Top at the top level, Table in a
// table's entry; FlagOnly are those a file must not set (what a
// destructive command acts on is said on the command line only).
type Keys struct {
	Top, Table func(key string) bool
	FlagOnly   func(key string) bool
	// Verb names the verb in errors: "walrelay run".
	Verb string
}

// Check judges the file's keys against the verb's: each must be one of
// its flags, at the right level. A table-level key at the top level is
// accepted as the default of every table only when the file has no
// tables: list (today's one-table flags); with one, it belongs in the
// table's entry.
func (f *File) Check(k Keys) error {
	for _, key := range f.Top.keys {
		v := f.Top.vals[key]
		switch {
		case k.FlagOnly != nil && k.FlagOnly(key):
			return f.errorf(v.Line, "%s is given on the command line only (--%s), never by a file or a variable", key, key)
		case f.Tables != nil && k.Table(key) && !k.Top(key):
			return f.errorf(v.Line, "%s is a table's setting: with a tables: list, give it in each table's entry", key)
		case !k.Top(key) && !k.Table(key):
			return f.errorf(v.Line, "%s is not a setting of %s (walrelay %s -h lists them)", key, k.Verb, strings.TrimPrefix(k.Verb, "walrelay "))
		}
	}
	for _, t := range f.Tables {
		if _, ok := t.vals["table"]; !ok {
			return f.errorf(t.Line, "a table's entry without table: give its name, like table: public.outbox_messages")
		}
		for _, key := range t.keys {
			v := t.vals[key]
			switch {
			case k.FlagOnly != nil && k.FlagOnly(key):
				return f.errorf(v.Line, "%s is given on the command line only (--%s), never by a file or a variable", key, key)
			case !k.Table(key) && k.Top(key):
				return f.errorf(v.Line, "%s is not a table's setting: give it once, at the top level", key)
			case !k.Table(key):
				return f.errorf(v.Line, "%s is not a table's setting of %s", key, k.Verb)
			}
		}
	}
	return nil
}

// Lookup is the top level's value of the flag name, for the flag set:
// the file as a source below the command line and the variables.
func (f *File) Lookup(name string) (string, bool) {
	if f == nil {
		return "", false
	}
	v, ok := f.Top.vals[name]
	return v.Text, ok
}
