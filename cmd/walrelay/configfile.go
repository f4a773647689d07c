package main

import (
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/internal/configfile"
	"github.com/walrelay/walrelay/internal/flagset"
	"github.com/walrelay/walrelay/schema"
)

// The config file (--config, WALRELAY_CONFIG; package configfile): one
// file serves every verb, as one set of variables does. Its top-level
// keys are flag names; a verb reads those of its own flags and ignores
// the others' (a key no verb has is an error). Its tables: list holds the
// table-level settings, one entry per outbox table. The file is read
// before the variables and the command line, which win over it.

// configFlag binds --config, which every verb has.
func configFlag(s *flagSet, o *options) {
	s.Group("Config file")
	s.Str(&o.ConfigFile, "config", "a YAML file of settings: keys are these flags' names without the dashes, tables: lists the outbox tables; variables and flags win over it")
}

// tableKey says whether a flag is a table's setting: in a tables: entry
// when the file lists its tables.
func tableKey(name string) bool {
	switch name {
	case "table", "preset", "aggregate-type-default", "content-type", "null-payload", "topic-template",
		"message-id-header", "ce-source", "dead-letter-table":
		return true
	}
	return strings.HasPrefix(name, "column-")
}

// configPath is the config file's path: --config on the command line
// (before a lone "--"), else WALRELAY_CONFIG; "" for none.
func configPath(args []string) string {
	if v, ok := flagArg(args, "config"); ok {
		return v
	}
	v, _ := lookupEnv(envName("config"))
	return v
}

// multiTableVerbs relay, set up, judge or recover every table of a config
// file's tables: list at once (a recovery replaces the slot of them all);
// the other verbs act on one, which --table names.
var multiTableVerbs = map[string]bool{"run": true, "check": true, "init": true, "status": true, "recover": true}

// configFile is a config file read and judged for a verb: the entries of
// the tables it acts on (one for the verbs of one table), in the file's
// order, and the source of a flag set for each.
type configFile struct {
	f      *configfile.File
	tables []configfile.Entry // nil without a tables: list
}

// readConfigFile reads and judges the file at path for verb, with the
// command line args: with a tables: list of several, a verb of one table
// needs --table naming one of them, and run, check, init and status (of
// the slot, whose recoveries table is the first table's) take no
// table-level setting from a flag or a variable (each table's are in its
// entry).
func readConfigFile(verb, path string, args []string) (*configFile, error) {
	f, err := configfile.Read(path)
	if err != nil {
		return nil, err
	}
	err = f.Check(configfile.Keys{
		Verb:     "walrelay " + verb,
		Top:      func(k string) bool { return len(flagOwners[k]) > 0 && !tableKey(k) },
		Table:    func(k string) bool { return len(flagOwners[k]) > 0 && tableKey(k) },
		FlagOnly: func(k string) bool { return flagOnly[k] || k == "config" },
	})
	if err != nil {
		return nil, err
	}
	cf := &configFile{f: f, tables: f.Tables}
	if err := cf.checkTables(); err != nil {
		return nil, err
	}
	if len(f.Tables) <= 1 {
		return cf, nil
	}
	if !multiTableVerbs[verb] {
		name, ok := flagArg(args, "table")
		if !ok {
			return nil, fmt.Errorf("%s lists %d tables: name the one walrelay %s acts on with --table (one of %s)", f.Path, len(f.Tables), verb, cf.tableNames())
		}
		for _, e := range f.Tables {
			if v, _ := e.Get("table"); sameTable(v.Text, name) {
				cf.tables = []configfile.Entry{e}
				return cf, nil
			}
		}
		return nil, fmt.Errorf("--table %s is none of the tables %s lists (%s)", name, f.Path, cf.tableNames())
	}
	for _, a := range args {
		if name, ok := flagName(a); ok && tableKey(name) {
			return nil, fmt.Errorf("--%s: %s lists %d tables: set a table's %s in its entry there", name, f.Path, len(f.Tables), name)
		}
	}
	for name := range flagOwners {
		if _, set := lookupEnv(envName(name)); set && tableKey(name) && !flagOnly[name] {
			return nil, fmt.Errorf("%s is set, and %s lists %d tables: set a table's %s in its entry there, not for all", envName(name), f.Path, len(f.Tables), name)
		}
	}
	return cf, nil
}

// checkTables refuses a table listed twice, naming both lines.
func (cf *configFile) checkTables() error {
	seen := map[schema.Table]int{}
	for _, e := range cf.f.Tables {
		v, _ := e.Get("table")
		t, err := schema.ParseTable(v.Text)
		if err != nil {
			return fmt.Errorf("%s:%d: table: %w", cf.f.Path, v.Line, err)
		}
		if line, dup := seen[t]; dup {
			return fmt.Errorf("%s:%d: table %s is listed twice (first on line %d): one entry per table", cf.f.Path, v.Line, t, line)
		}
		seen[t] = v.Line
	}
	return nil
}

func (cf *configFile) tableNames() string {
	var names []string
	for _, e := range cf.f.Tables {
		v, _ := e.Get("table")
		names = append(names, v.Text)
	}
	return strings.Join(names, ", ")
}

// source is what a flag set reads of the file for table i (of cf.tables):
// the top-level keys, and the table's keys from its entry.
func (cf *configFile) source(i int) flagset.Source {
	return func(name string) (string, string, bool) {
		e := cf.f.Top
		if i < len(cf.tables) && tableKey(name) {
			e = cf.tables[i]
		}
		v, ok := e.Get(name)
		return v.Text, fmt.Sprintf("%s:%d", cf.f.Path, v.Line), ok
	}
}

// entry is where table i's entry stands ("walrelay.yaml:12"); "" without
// a tables: list.
func (cf *configFile) entry(i int) string {
	if i >= len(cf.tables) {
		return ""
	}
	v, _ := cf.tables[i].Get("table")
	return fmt.Sprintf("%s:%d", cf.f.Path, v.Line)
}

// sameTable reports whether two --table values name the same table.
func sameTable(a, b string) bool {
	ta, errA := schema.ParseTable(a)
	tb, errB := schema.ParseTable(b)
	return errA == nil && errB == nil && ta == tb
}

// flagName is the flag an argument sets ("--table", "-table=x"), if it is
// one.
func flagName(a string) (string, bool) {
	if a == "--" || !strings.HasPrefix(a, "-") {
		return "", false
	}
	name := strings.TrimLeft(a, "-")
	name, _, _ = strings.Cut(name, "=")
	return name, name != ""
}

// flagArg is the value of the flag name on the command line (before a
// lone "--"), if it is there.
func flagArg(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, p := range []string{"--" + name, "-" + name} {
			if a == p && i+1 < len(args) {
				return args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}
