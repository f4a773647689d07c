package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// errHelp is returned by a verb's parse after -h printed its flags.
var errHelp = errors.New("help")

// flagSet is the flags of one verb, in titled groups. Each flag may have a
// WALRELAY_* variable (its name in upper case with _ for -), read when the
// verb is parsed; a flag on the command line wins over its variable. A
// variable of a flag the verb does not have is never read. Flags marked
// flag-only (what a destructive command acts on) have no variable.
type flagSet struct {
	name   string // "walrelay dlq retry"
	fs     *flag.FlagSet
	groups []flagGroup
	specs  map[string]flagSpec
	// explicit are the flags the command line or a variable set, once a
	// preset was applied (applyPreset); nil before.
	explicit map[string]bool
}

type flagGroup struct {
	title string
	names []string
}

// flagSpec is what parse and -h need to know of a flag beyond flag.Flag.
type flagSpec struct {
	kind     string // for messages about a bad variable: "a duration (like 10s or 500ms)"
	flagOnly bool   // never read from the environment
	secret   bool   // -h never shows the value as it is
}

func newFlagSet(name string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse writes the errors itself, briefly
	fs.Usage = func() {}
	return &flagSet{name: name, fs: fs, specs: map[string]flagSpec{}}
}

// envName is the variable of a flag: --max-in-flight-bytes is
// WALRELAY_MAX_IN_FLIGHT_BYTES.
func envName(flagName string) string {
	return "WALRELAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// group starts a titled group; the flags bound next belong to it.
func (s *flagSet) group(title string) {
	s.groups = append(s.groups, flagGroup{title: title})
}

func (s *flagSet) add(name string, spec flagSpec) {
	if len(s.groups) == 0 {
		s.group("Flags")
	}
	g := &s.groups[len(s.groups)-1]
	g.names = append(g.names, name)
	s.specs[name] = spec
}

// The binders take a flag's default from where it points: the options
// start at the packages' defaults (defaultOptions).

func (s *flagSet) str(p *string, name, help string) {
	s.fs.StringVar(p, name, *p, help)
	s.add(name, flagSpec{})
}

func (s *flagSet) dur(p *time.Duration, name, help string) {
	s.fs.DurationVar(p, name, *p, help)
	s.add(name, flagSpec{kind: "a duration (like 10s or 500ms)"})
}

func (s *flagSet) int(p *int, name, help string) {
	s.fs.IntVar(p, name, *p, help)
	s.add(name, flagSpec{kind: "a whole number"})
}

func (s *flagSet) boolean(p *bool, name, help string) {
	s.fs.BoolVar(p, name, *p, help)
	s.add(name, flagSpec{kind: "true or false"})
}

// secret binds a flag whose value is, or may hold, a secret: -h shows it
// as show makes it (for a URL, without its password), or not at all when
// show is nil.
func (s *flagSet) secret(p *string, name, help string, show func(string) string) {
	s.fs.Var(&secretValue{p: p, show: show}, name, help)
	s.add(name, flagSpec{secret: true})
}

// has reports whether the verb has the flag.
func (s *flagSet) has(name string) bool { return s.fs.Lookup(name) != nil }

// flagOnly marks the flags named as never read from the environment.
func (s *flagSet) flagOnly(names ...string) {
	for _, n := range names {
		spec := s.specs[n]
		spec.flagOnly = true
		s.specs[n] = spec
	}
}

// parse reads the variables, then the command line. -h prints the flags on
// stdout (errHelp). A flag the verb lacks, a bad flag value or an argument
// is a usage error of a few lines on stderr (errUsage). A bad variable is
// an error naming it.
func (s *flagSet) parse(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	envErrs := s.applyEnv(lookupEnv)
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// -h shows what a preset given before it sets, as "set to".
			s.applyPreset() //nolint:errcheck // an unknown preset shows nothing more
			s.usage(stdout)
			return errHelp
		}
		fmt.Fprintf(stderr, "%s: %s\nRun '%s -h' for its flags.\n", s.name, s.explain(err), s.name)
		return errUsage
	}
	if s.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\nRun '%s -h' for its flags.\n", s.name, s.fs.Arg(0), s.name)
		return errUsage
	}
	if len(envErrs) > 0 {
		return errors.New(strings.Join(envErrs, "; "))
	}
	return s.applyPreset()
}

// applyEnv sets each flag from its variable, where it has one and it is
// set, and returns what could not be set.
func (s *flagSet) applyEnv(lookupEnv func(string) (string, bool)) []string {
	var errs []string
	for _, g := range s.groups {
		for _, name := range g.names {
			spec := s.specs[name]
			if spec.flagOnly {
				continue
			}
			v, ok := lookupEnv(envName(name))
			if !ok {
				continue
			}
			if err := s.fs.Set(name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q is not %s", envName(name), v, spec.kind))
			}
		}
	}
	return errs
}

// explain rewords the flag package's error: it names flags with one dash,
// and says nothing of a flag that belongs to another verb.
func (s *flagSet) explain(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		if verbs := flagOwners[name]; len(verbs) > 0 {
			return fmt.Sprintf("--%s is not a flag of %s (it is one of %s)", name, s.name, joinVerbs(verbs))
		}
		if near := s.nearest(name); near != "" {
			return fmt.Sprintf("--%s is not a flag of %s; did you mean --%s?", name, s.name, near)
		}
		return fmt.Sprintf("--%s is not a flag of %s", name, s.name)
	}
	return strings.NewReplacer("flag -", "flag --", "argument: -", "argument: --").Replace(msg)
}

// nearest is the verb's flag closest to a misspelt name, within two edits,
// or "".
func (s *flagSet) nearest(name string) string {
	best, bestDist := "", 3
	s.fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func joinVerbs(verbs []string) string {
	quoted := make([]string, len(verbs))
	for i, v := range verbs {
		quoted[i] = "'walrelay " + v + "'"
	}
	return strings.Join(quoted, ", ")
}

// usage writes the verb's flags by group, each with its variable and the
// value it has now (its default, or what its variable set).
func (s *flagSet) usage(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s [flags]\n", s.name)
	for _, g := range s.groups {
		fmt.Fprintf(&b, "\n%s:\n", g.title)
		for _, name := range g.names {
			s.writeFlag(&b, s.fs.Lookup(name), s.specs[name])
		}
	}
	io.WriteString(w, b.String()) //nolint:errcheck // the terminal
}

func (s *flagSet) writeFlag(b *strings.Builder, f *flag.Flag, spec flagSpec) {
	typ, help := flag.UnquoteUsage(f)
	if spec.kind == "true or false" {
		typ = ""
	} else if spec.secret || typ == "" {
		typ = "string"
	}
	fmt.Fprintf(b, "  --%s", f.Name)
	if typ != "" {
		fmt.Fprintf(b, " %s", typ)
	}
	if spec.flagOnly {
		b.WriteString("   (command line only)")
	} else {
		fmt.Fprintf(b, "   (%s)", envName(f.Name))
	}
	fmt.Fprintf(b, "\n      %s", help)
	switch v := f.Value.String(); {
	case v == "" || v == "false" || (v == "0" || v == "0s") && v == f.DefValue:
	case v == f.DefValue:
		fmt.Fprintf(b, " (default %s)", quoteIfString(v, spec))
	default:
		fmt.Fprintf(b, " (set to %s)", quoteIfString(v, spec))
	}
	b.WriteString("\n")
}

func quoteIfString(v string, spec flagSpec) string {
	if spec.kind == "" {
		return fmt.Sprintf("%q", v)
	}
	return v
}

// flagOwners maps every flag name to the verbs that have it, for the error
// about a flag given to the wrong verb. Filled by init from verbFlags.
var flagOwners = map[string][]string{}

func init() {
	for _, verb := range verbNames() {
		s := newFlagSet("walrelay " + verb)
		o := defaultOptions()
		bindVerb(verb, s, &o)
		s.fs.VisitAll(func(f *flag.Flag) { flagOwners[f.Name] = append(flagOwners[f.Name], verb) })
	}
	for _, verbs := range flagOwners {
		sort.Strings(verbs)
	}
}

// lookupEnv is os.LookupEnv; tests set variables with t.Setenv.
var lookupEnv = os.LookupEnv
