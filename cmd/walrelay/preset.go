package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/internal/preset"
)

// presetFlag binds --preset (package preset holds the presets).
func presetFlag(s *flagSet, o *options) {
	s.str(&o.Preset, "preset", preset.Help())
}

// applyPreset sets the flags of the preset --preset names that the verb
// has and that neither the command line nor a variable set. Call it after
// both were read: flag.FlagSet.Visit lists exactly the flags set.
func (s *flagSet) applyPreset() error {
	f := s.fs.Lookup("preset")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	p, ok := preset.Lookup(f.Value.String())
	if !ok {
		return fmt.Errorf("--preset (%s) is %q; want one of %s", envName("preset"), f.Value.String(), strings.Join(preset.Names(), ", "))
	}
	s.explicit = map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { s.explicit[f.Name] = true })
	for _, pf := range p.Flags {
		if !s.has(pf.Name) || s.explicit[pf.Name] {
			continue
		}
		if err := s.fs.Set(pf.Name, pf.Value); err != nil {
			return fmt.Errorf("--preset %s: --%s: %w", p.Name, pf.Name, err)
		}
	}
	return nil
}

// presetSummary says which preset is in effect and what it set of the
// verb's flags, for `walrelay check`: "" without one.
func (s *flagSet) presetSummary(name string) string {
	p, ok := preset.Lookup(name)
	if !ok {
		return ""
	}
	return p.Summary(s.has, func(f string) bool { return s.explicit[f] })
}
