package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"
)

// A preset is a set of flag defaults that make walrelay stand in for
// another tool without changing its consumers. It fills only the flags
// the verb has and nobody set: a flag on the command line or its variable
// wins over the preset, as over any default (DECISIONS 34).
type preset struct {
	// about says what the preset is for, in -h.
	about string
	// flags are the flag values the preset sets, in the order -h and check
	// show them.
	flags [][2]string
}

// presetDebezium makes walrelay a drop-in for Kafka Connect with
// Debezium's Outbox Event Router at its defaults: its table's column
// names, its topics, the event id in a header named id, the span context
// as a W3C traceparent, a NULL payload as a tombstone, and JSON payloads.
// The table is the user's (--table), as in Debezium. Debezium's table has
// no aggregate version, headers or topic column: walrelay's default names
// for them are simply absent from it, which walrelay allows.
var presetDebezium = preset{
	about: "Debezium's Outbox Event Router at its defaults",
	flags: [][2]string{
		{"column-message-id", "id"},
		{"column-aggregate-type", "aggregatetype"},
		{"column-aggregate-id", "aggregateid"},
		{"column-type", "type"},
		{"column-payload", "payload"},
		{"column-occurred-at", "timestamp"},
		{"column-tracing-span-context", "tracingspancontext"},
		{"null-payload", "tombstone"},
		{"content-type", "application/json"},
		{"topic-template", "outbox.event.{aggregate_type}"},
		{"message-id-header", "id"},
	},
}

// presets are the presets by the name --preset takes.
var presets = map[string]preset{"debezium": presetDebezium}

// presetNames are the presets' names, sorted.
func presetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

const presetHelp = "fill the defaults of another tool's setup; a flag or variable set explicitly still wins. debezium: Debezium's Outbox Event Router at its defaults " +
	"(--column-message-id id, --column-aggregate-type aggregatetype, --column-aggregate-id aggregateid, --column-type type, --column-payload payload, " +
	"--column-occurred-at timestamp, --column-tracing-span-context tracingspancontext, --null-payload tombstone, --content-type application/json, " +
	"--topic-template outbox.event.{aggregate_type}, --message-id-header id; see docs/TABLES.md)"

// presetFlag binds --preset.
func presetFlag(s *flagSet, o *options) {
	s.str(&o.Preset, "preset", presetHelp)
}

// applyPreset sets the flags of the preset --preset names that the verb
// has and that neither the command line nor a variable set. Call it after
// both were read: flag.FlagSet.Visit lists exactly the flags set.
func (s *flagSet) applyPreset() error {
	f := s.fs.Lookup("preset")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	p, ok := presets[f.Value.String()]
	if !ok {
		return fmt.Errorf("--preset (%s) is %q; want one of %s", envName("preset"), f.Value.String(), strings.Join(presetNames(), ", "))
	}
	s.explicit = map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { s.explicit[f.Name] = true })
	for _, kv := range p.flags {
		if !s.has(kv[0]) || s.explicit[kv[0]] {
			continue
		}
		if err := s.fs.Set(kv[0], kv[1]); err != nil {
			return fmt.Errorf("--preset %s: --%s: %w", f.Value.String(), kv[0], err)
		}
	}
	return nil
}

// presetSummary says which preset is in effect and what it set of the
// verb's flags, for `walrelay check`: "" without one. Flags set
// explicitly are said as such.
func (s *flagSet) presetSummary(name string) string {
	p, ok := presets[name]
	if !ok {
		return ""
	}
	parts := make([]string, 0, len(p.flags))
	for _, kv := range p.flags {
		if !s.has(kv[0]) {
			continue
		}
		if s.explicit[kv[0]] {
			parts = append(parts, "--"+kv[0]+" (set explicitly)")
			continue
		}
		parts = append(parts, "--"+kv[0]+" "+kv[1])
	}
	return name + " (" + p.about + "): " + strings.Join(parts, ", ")
}
