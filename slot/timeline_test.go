package slot

import (
	"strings"
	"testing"
)

func TestParseTimelineHistory(t *testing.T) {
	// A history file of timeline 3 as PostgreSQL writes it: a line per
	// ancestor, tab-separated, with its reason.
	content := "1\t0/3000160\tno recovery target specified\n\n# a comment\n2\t0/5A01F28\tno recovery target specified\n"
	got, err := parseTimelineHistory([]byte(content), 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []TimelineEnd{{Timeline: 1, End: 0x3000160}, {Timeline: 2, End: 0x5A01F28}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("history = %+v; want %+v", got, want)
	}
	if got, err := parseTimelineHistory(nil, 2); err != nil || len(got) != 0 {
		t.Errorf("an empty history = %+v, %v; want none, no error", got, err)
	}
}

// A history walrelay cannot read whole vouches for nothing: each of these
// is an error, never a partial history.
func TestParseTimelineHistoryRefusesWhatItCannotTrust(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"1\n", "want a timeline and a switch point"},
		{"x\t0/10\tr\n", "not a positive number"},
		{"0\t0/10\tr\n", "not a positive number"},
		{"1\tnowhere\tr\n", "switch point"},
		{"3\t0/10\tr\n", "not below it"},             // the history of timeline 3 names itself
		{"2\t0/10\tr\n1\t0/20\tr\n", "out of order"}, // timelines must rise
		{"1\t0/20\tr\n2\t0/10\tr\n", "out of order"}, // switch points must not fall
	} {
		got, err := parseTimelineHistory([]byte(tc.content), 3)
		if err == nil || !strings.Contains(err.Error(), tc.want) || got != nil {
			t.Errorf("history %q = %+v, %v; want an error saying %q", tc.content, got, err, tc.want)
		}
	}
}
