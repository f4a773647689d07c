package deploy_test

import (
	"regexp"
	"strings"
	"testing"
)

var (
	flagVariable = regexp.MustCompile(`\((WALRELAY_[A-Z0-9_]+)\)`)
	flagName     = regexp.MustCompile(`(?m)^\s+(--[a-z0-9-]+)\b`)
)

// verbFlags is what `walrelay <verb> -h` lists: the flags, and the
// variables that set them.
type verbFlags struct {
	Verb      string
	Flags     map[string]bool // "--slot"
	Variables map[string]bool // "WALRELAY_SLOT"
}

// flagsOf runs `walrelay <verb> -h` (verb may be "dlq list") and reads its
// flags and variables; it fails on an unknown verb.
func flagsOf(t *testing.T, verb string) verbFlags {
	t.Helper()
	help := walrelayHelp(t, strings.Fields(verb)...)
	f := verbFlags{Verb: verb, Flags: map[string]bool{}, Variables: map[string]bool{}}
	for _, m := range flagVariable.FindAllStringSubmatch(help, -1) {
		f.Variables[m[1]] = true
	}
	for _, m := range flagName.FindAllStringSubmatch(help, -1) {
		f.Flags[m[1]] = true
	}
	if !f.Variables["WALRELAY_POSTGRES_URL"] && verb != "schema" {
		t.Fatalf("`walrelay %s -h` lists no WALRELAY_POSTGRES_URL:\n%s", verb, help)
	}
	return f
}

// checkArgs reports the flags of a walrelay command line (after its verb)
// that the verb lacks: "--name" and "--name=value" forms.
func (f verbFlags) checkArgs(args []string) []string {
	var bad []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		name = "--" + strings.TrimLeft(name, "-")
		if !f.Flags[name] {
			bad = append(bad, "walrelay "+f.Verb+" has no flag "+name)
		}
	}
	return bad
}

// checkVariables reports the WALRELAY_* variables that the verb does not
// read: a verb ignores the others, so one there is a mistake of the file.
func (f verbFlags) checkVariables(vars []string) []string {
	var bad []string
	for _, k := range vars {
		if strings.HasPrefix(k, "WALRELAY_") && !f.Variables[k] {
			bad = append(bad, k+" is not a variable of walrelay "+f.Verb)
		}
	}
	return bad
}

// verbOf splits a walrelay command line into its verb ("dlq list" for the
// dlq verbs) and the rest; no arguments is the image's CMD, run.
func verbOf(args []string) (verb string, rest []string) {
	switch {
	case len(args) == 0:
		return "run", nil
	case args[0] == "dlq" && len(args) > 1:
		return "dlq " + args[1], args[2:]
	}
	return args[0], args[1:]
}
