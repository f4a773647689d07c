package main

import (
	"runtime/debug"
	"testing"
)

// Without a stamped version, walrelay reports what Go recorded: the module
// version, else the commit, else "dev".
func TestVersionFromBuildInfo(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "dev"},
		{"nothing recorded", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"module version", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}}}, "v1.4.0"},
		{"revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, "0123456789ab"},
		{"modified tree", &debug.BuildInfo{Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, "0123456789ab-dirty"},
	} {
		if got := versionFromBuildInfo(tc.bi); got != tc.want {
			t.Errorf("%s: got %q; want %q", tc.name, got, tc.want)
		}
	}
}
