// Package preset holds walrelay's presets: named sets of flag values that
// make walrelay stand in for another tool, reading the outbox table that
// tool's setup has and writing the records its consumers expect, without
// changing either. A preset only supplies defaults: cmd/walrelay applies
// the values of the flags a verb has and nobody set, so a flag on the
// command line or its variable wins over the preset, as over any default
// (DECISIONS 34).
//
// A preset is said in walrelay's flags, not in the packages'
// configurations, because that is how it is applied, shown in -h and
// summarised by `walrelay check`.
//
// Internal: walrelay's own, for cmd/walrelay.
package preset

import (
	"sort"
	"strings"
)

// A Preset is a set of flag values, by the name --preset takes.
type Preset struct {
	// Name is what --preset takes.
	Name string
	// About says what the preset is for, in -h and check.
	About string
	// Flags are the flag values the preset sets, in the order -h and check
	// show them.
	Flags []Flag
}

// Flag is one flag value of a preset: the flag's name without its dashes.
type Flag struct{ Name, Value string }

// debezium makes walrelay a drop-in for Kafka Connect with Debezium's
// Outbox Event Router at its defaults: its table's column names, its
// topics, the event id in a header named id, the span context as a W3C
// traceparent, a NULL payload as a tombstone, and JSON payloads. The table
// is the user's (--table), as in Debezium. Debezium's table has no
// aggregate version, headers or topic column: walrelay's default names for
// them are simply absent from it, which walrelay allows.
var debezium = Preset{
	Name:  "debezium",
	About: "Debezium's Outbox Event Router at its defaults",
	Flags: []Flag{
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

// all are the presets, sorted by name.
var all = []Preset{debezium}

// Lookup returns the preset of that name.
func Lookup(name string) (Preset, bool) {
	for _, p := range all {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// Names are the presets' names, sorted.
func Names() []string {
	names := make([]string, len(all))
	for i, p := range all {
		names[i] = p.Name
	}
	sort.Strings(names)
	return names
}

// Help is the usage of --preset: what a preset does and, for each, what it
// is for and the flag values it sets.
func Help() string {
	var b strings.Builder
	b.WriteString("fill the defaults of another tool's setup; a flag or variable set explicitly still wins.")
	for _, p := range all {
		parts := make([]string, len(p.Flags))
		for i, f := range p.Flags {
			parts[i] = "--" + f.Name + " " + f.Value
		}
		b.WriteString(" " + p.Name + ": " + p.About + " (" + strings.Join(parts, ", ") + "; see docs/TABLES.md)")
	}
	return b.String()
}

// Summary says p and what it set of the flags the verb has, for `walrelay
// check`; a flag set explicitly (which p therefore did not set) is said as
// such.
func (p Preset) Summary(has, explicit func(flag string) bool) string {
	parts := make([]string, 0, len(p.Flags))
	for _, f := range p.Flags {
		switch {
		case !has(f.Name):
		case explicit(f.Name):
			parts = append(parts, "--"+f.Name+" (set explicitly)")
		default:
			parts = append(parts, "--"+f.Name+" "+f.Value)
		}
	}
	return p.Name + " (" + p.About + "): " + strings.Join(parts, ", ")
}
