package schema

import (
	"strings"
	"testing"
)

func TestValidTraceparent(t *testing.T) {
	const ok = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{ok, true},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", true},
		{"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true},
		{"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-comes-later", true},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more", false}, // version 00 is exactly 55
		{"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x", false},
		{"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false},
		{"00-00000000000000000000000000000000-b7ad6b7169203331-01", false},
		{"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", false},
		{"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01", false}, // upper case
		{"00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01", false},  // 31 digits
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01", false},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1", false},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g", false},
		{"0-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false},
		{"00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01", false},
		{" " + ok, false},
		{ok + " ", false},
		{"00-abc-def-01", false},
		{"", false},
	} {
		if got := ValidTraceparent(tc.s); got != tc.want {
			t.Errorf("ValidTraceparent(%q) = %v; want %v", tc.s, got, tc.want)
		}
	}
}

func TestValidTracestate(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"congo=t61rcWkgMzE", true},
		{"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", true},
		{strings.Repeat("a", 512), true},
		{strings.Repeat("a", 513), false},
		{"", false},
		{"a=b\nc=d", false},
		{"a=ü", false},
	} {
		if got := ValidTracestate(tc.s); got != tc.want {
			t.Errorf("ValidTracestate(%q) = %v; want %v", tc.s, got, tc.want)
		}
	}
}
