package main

import (
	"os"
	"sort"

	"github.com/walrelay/walrelay/internal/flagset"
)

// flagSet is the flags of one verb (package flagset: groups, variables,
// -h, usage errors, --preset).
type flagSet = flagset.Set

// errHelp is returned by a verb's parse after -h printed its flags.
var errHelp = flagset.ErrHelp

// envName is the variable of a flag: --max-in-flight-bytes is
// WALRELAY_MAX_IN_FLIGHT_BYTES.
func envName(flagName string) string { return flagset.EnvName(flagName) }

// newFlagSet is the empty flag set of the command name.
func newFlagSet(name string) *flagSet { return flagset.New(name, flagOwners) }

// flagOwners maps every flag name to the verbs that have it, for the error
// about a flag given to the wrong verb. Filled by init from verbFlags.
var flagOwners = map[string][]string{}

// flagOnly are the flags some verb reads from the command line only (what
// a destructive command acts on): never from a variable or the config
// file. Filled by init.
var flagOnly = map[string]bool{}

func init() {
	for _, verb := range verbNames() {
		s := newFlagSet("walrelay " + verb)
		o := defaultOptions()
		bindVerb(verb, s, &o)
		for _, name := range s.Names() {
			flagOwners[name] = append(flagOwners[name], verb)
			if s.IsFlagOnly(name) {
				flagOnly[name] = true
			}
		}
	}
	for _, verbs := range flagOwners {
		sort.Strings(verbs)
	}
}

// lookupEnv is os.LookupEnv; tests set variables with t.Setenv.
var lookupEnv = os.LookupEnv
