package bytesize

import (
	"math"
	"testing"
)

func TestFormat(t *testing.T) {
	cases := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{3 << 19, "1.5 MiB"},
		{1<<20 - 1, "1.0 MiB"}, // rounds up into the next unit, not "1024.0 KiB"
		{16 << 20, "16.0 MiB"},
		{5 << 30, "5.0 GiB"},
		{-(3 << 19), "-1.5 MiB"},
		{math.MaxInt64, "8.0 EiB"},
		{math.MinInt64, "-9223372036854775808 B"},
	}
	for _, c := range cases {
		if got := Format(c.n); got != c.want {
			t.Errorf("Format(%d): got %q; want %q", c.n, got, c.want)
		}
	}
}
