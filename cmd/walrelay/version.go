package main

import "runtime/debug"

// versionFromBuildInfo is the version of a binary built without
// -X main.buildVersion (scripts/build.sh always sets it): the main module's
// version when Go recorded one (go install of a tagged module, or a build
// in a git checkout with -buildvcs), else the commit Go recorded
// (vcs.revision, 12 digits, "-dirty" for a modified tree), else "dev".
func versionFromBuildInfo(bi *debug.BuildInfo) string {
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		rev += "-dirty"
	}
	return rev
}
