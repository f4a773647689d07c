package main

import (
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/internal/configfile"
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
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, p := range []string{"--config", "-config"} {
			if a == p && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v
			}
		}
	}
	v, _ := lookupEnv(envName("config"))
	return v
}

// readConfigFile reads and judges the file at path for verb, and makes s
// read it.
func readConfigFile(verb, path string, s *flagSet) error {
	f, err := configfile.Read(path)
	if err != nil {
		return err
	}
	err = f.Check(configfile.Keys{
		Verb:     "walrelay " + verb,
		Top:      func(k string) bool { return len(flagOwners[k]) > 0 && !tableKey(k) },
		Table:    func(k string) bool { return len(flagOwners[k]) > 0 && tableKey(k) },
		FlagOnly: func(k string) bool { return flagOnly[k] || k == "config" },
	})
	if err != nil {
		return err
	}
	if len(f.Tables) > 1 {
		return fmt.Errorf("%s:%d: %d tables: one walrelay relays one outbox table for now; list one, or run a walrelay with a slot of its own per table",
			f.Path, f.Tables[1].Line, len(f.Tables))
	}
	s.SetFile(func(name string) (string, string, bool) {
		e := f.Top
		if len(f.Tables) == 1 && tableKey(name) {
			e = f.Tables[0]
		}
		v, ok := e.Get(name)
		return v.Text, fmt.Sprintf("%s:%d", f.Path, v.Line), ok
	})
	return nil
}
