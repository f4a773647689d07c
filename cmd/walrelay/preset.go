package main

import "github.com/walrelay/walrelay/internal/preset"

// presetFlag binds --preset (package preset holds the presets; the flag
// set applies the one named).
func presetFlag(s *flagSet, o *options) {
	s.Str(&o.Preset, "preset", preset.Help())
}
