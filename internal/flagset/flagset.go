// Package flagset is walrelay's command line: the flags of one verb in
// titled groups, each with its WALRELAY_* variable (unless it is
// command-line only), -h that shows every flag with its variable and its
// value, short usage errors that name the verb a foreign flag belongs to
// or the flag a misspelt one was meant to be, and --preset applied to the
// flags nobody set.
//
// Internal: cmd/walrelay's, which binds its verbs' flags with it.
package flagset

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/preset"
)

// ErrHelp is returned by Parse after -h printed the flags.
var ErrHelp = errors.New("help")

// ErrUsage marks a command line that was wrong; Parse printed why.
var ErrUsage = errors.New("usage")

// Set is the flags of one verb, in titled groups. Each flag may have a
// WALRELAY_* variable (its name in upper case with _ for -), read when the
// verb is parsed; a flag on the command line wins over its variable. A
// variable of a flag the verb does not have is never read. Flags marked
// flag-only (what a destructive command acts on) have no variable.
type Set struct {
	name   string // "walrelay dlq retry"
	fs     *flag.FlagSet
	groups []flagGroup
	specs  map[string]flagSpec
	// explicit are the flags the command line or a variable set, once a
	// preset was applied (ApplyPreset); nil before.
	explicit map[string]bool
	owners   map[string][]string // see New
	file     Source              // SetFile; nil for none
}

// Source is a config file's value of a flag and where it stands in the
// file ("walrelay.yaml:3"), for its errors.
type Source func(name string) (value, where string, ok bool)

// SetFile makes Parse set the flags a config file gives first, below the
// variables and the command line: each wins over it. A flag-only flag is
// never read from it.
func (s *Set) SetFile(src Source) { s.file = src }

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

// New returns the empty flag set of the command name ("walrelay dlq
// retry"). owners maps a flag name to the verbs that have it (nil for
// none), for the error about a flag given to the wrong verb; it is read
// only when such an error is written, so it may be filled later.
func New(name string, owners map[string][]string) *Set {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Parse writes the errors itself, briefly
	fs.Usage = func() {}
	return &Set{name: name, fs: fs, specs: map[string]flagSpec{}, owners: owners}
}

// Names are the set's flags, sorted.
func (s *Set) Names() []string {
	var names []string
	s.fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// EnvName is the variable of a flag: --max-in-flight-bytes is
// WALRELAY_MAX_IN_FLIGHT_BYTES.
func EnvName(flagName string) string {
	return "WALRELAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Group starts a titled group; the flags bound next belong to it.
func (s *Set) Group(title string) {
	s.groups = append(s.groups, flagGroup{title: title})
}

func (s *Set) add(name string, spec flagSpec) {
	if len(s.groups) == 0 {
		s.Group("Flags")
	}
	g := &s.groups[len(s.groups)-1]
	g.names = append(g.names, name)
	s.specs[name] = spec
}

// The binders take a flag's default from where it points: walrelay's
// options start at the packages' defaults.

// Str binds a string flag.
func (s *Set) Str(p *string, name, help string) {
	s.fs.StringVar(p, name, *p, help)
	s.add(name, flagSpec{})
}

// Dur binds a duration flag.
func (s *Set) Dur(p *time.Duration, name, help string) {
	s.fs.DurationVar(p, name, *p, help)
	s.add(name, flagSpec{kind: "a duration (like 10s or 500ms)"})
}

// Int binds a whole-number flag.
func (s *Set) Int(p *int, name, help string) {
	s.fs.IntVar(p, name, *p, help)
	s.add(name, flagSpec{kind: "a whole number"})
}

// Bool binds a boolean flag.
func (s *Set) Bool(p *bool, name, help string) {
	s.fs.BoolVar(p, name, *p, help)
	s.add(name, flagSpec{kind: "true or false"})
}

// Secret binds a flag whose value is, or may hold, a secret: -h shows it
// as show makes it (for a URL, without its password), or not at all when
// show is nil.
func (s *Set) Secret(p *string, name, help string, show func(string) string) {
	s.fs.Var(&secretValue{p: p, show: show}, name, help)
	s.add(name, flagSpec{secret: true})
}

// IsFlagOnly reports whether the verb's flag is read from the command
// line only.
func (s *Set) IsFlagOnly(name string) bool { return s.specs[name].flagOnly }

// Has reports whether the verb has the flag.
func (s *Set) Has(name string) bool { return s.fs.Lookup(name) != nil }

// FlagOnly marks the flags named as never read from the environment.
func (s *Set) FlagOnly(names ...string) {
	for _, n := range names {
		spec := s.specs[n]
		spec.flagOnly = true
		s.specs[n] = spec
	}
}

// Parse reads the config file (SetFile), the variables, then the command
// line, each winning over the one before. -h prints the flags on
// stdout (ErrHelp). A flag the verb lacks, a bad flag value or an argument
// is a usage error of a few lines on stderr (ErrUsage). A bad variable is
// an error naming it.
func (s *Set) Parse(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	envErrs := append(s.applyFile(), s.applyEnv(lookupEnv)...)
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// -h shows what a preset given before it sets, as "set to".
			s.ApplyPreset() //nolint:errcheck // an unknown preset shows nothing more
			s.usage(stdout)
			return ErrHelp
		}
		fmt.Fprintf(stderr, "%s: %s\nRun '%s -h' for its flags.\n", s.name, s.explain(err), s.name)
		return ErrUsage
	}
	if s.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\nRun '%s -h' for its flags.\n", s.name, s.fs.Arg(0), s.name)
		return ErrUsage
	}
	if len(envErrs) > 0 {
		return errors.New(strings.Join(envErrs, "; "))
	}
	return s.ApplyPreset()
}

// applyFile sets each flag the config file gives, and returns what could
// not be set.
func (s *Set) applyFile() []string {
	if s.file == nil {
		return nil
	}
	var errs []string
	for _, g := range s.groups {
		for _, name := range g.names {
			v, where, ok := s.file(name)
			if !ok || s.specs[name].flagOnly {
				continue
			}
			if err := s.fs.Set(name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %s: %q is not %s", where, name, v, s.specs[name].kind))
			}
		}
	}
	return errs
}

// applyEnv sets each flag from its variable, where it has one and it is
// set, and returns what could not be set.
func (s *Set) applyEnv(lookupEnv func(string) (string, bool)) []string {
	var errs []string
	for _, g := range s.groups {
		for _, name := range g.names {
			spec := s.specs[name]
			if spec.flagOnly {
				continue
			}
			v, ok := lookupEnv(EnvName(name))
			if !ok {
				continue
			}
			if err := s.fs.Set(name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q is not %s", EnvName(name), v, spec.kind))
			}
		}
	}
	return errs
}

// explain rewords the flag package's error: it names flags with one dash,
// and says nothing of a flag that belongs to another verb.
func (s *Set) explain(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		if verbs := s.owners[name]; len(verbs) > 0 {
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
func (s *Set) nearest(name string) string {
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
func (s *Set) usage(w io.Writer) {
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

func (s *Set) writeFlag(b *strings.Builder, f *flag.Flag, spec flagSpec) {
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
		fmt.Fprintf(b, "   (%s)", EnvName(f.Name))
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

// secretValue is a flag holding a secret: a password, or a connection
// string that may carry one. -h shows show(value) as the default (nothing
// when show is nil), so a secret set through its WALRELAY_* variable is
// never printed.
type secretValue struct {
	p    *string
	show func(string) string
}

func (s *secretValue) Set(v string) error { *s.p = v; return nil }

func (s *secretValue) String() string {
	if s == nil || s.p == nil || s.show == nil || *s.p == "" {
		return ""
	}
	return s.show(*s.p)
}

// ApplyPreset sets the flags of the preset --preset names that the verb
// has and that neither the command line nor a variable set. Call it after
// both were read: flag.FlagSet.Visit lists exactly the flags set.
func (s *Set) ApplyPreset() error {
	f := s.fs.Lookup("preset")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	p, ok := preset.Lookup(f.Value.String())
	if !ok {
		return fmt.Errorf("--preset (%s) is %q; want one of %s", EnvName("preset"), f.Value.String(), strings.Join(preset.Names(), ", "))
	}
	s.explicit = map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { s.explicit[f.Name] = true })
	for _, pf := range p.Flags {
		if !s.Has(pf.Name) || s.explicit[pf.Name] {
			continue
		}
		if err := s.fs.Set(pf.Name, pf.Value); err != nil {
			return fmt.Errorf("--preset %s: --%s: %w", p.Name, pf.Name, err)
		}
	}
	return nil
}

// PresetSummary says which preset is in effect and what it set of the
// verb's flags, for `walrelay check`: "" without one.
func (s *Set) PresetSummary(name string) string {
	p, ok := preset.Lookup(name)
	if !ok {
		return ""
	}
	return p.Summary(s.Has, func(f string) bool { return s.explicit[f] })
}
