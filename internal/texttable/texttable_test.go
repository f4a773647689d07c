package texttable

import (
	"bytes"
	"errors"
	"testing"
	"text/tabwriter"
)

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows [][]string
		want string
	}{
		{"nothing", nil, ""},
		{"one column is not padded", [][]string{{"a"}, {"long"}}, "a\nlong\n"},
		{
			"columns aligned, last cell unpadded",
			[][]string{{"key", "value"}, {"longer key", "v"}},
			"key         value\nlonger key  v\n",
		},
		{
			"an empty last cell still follows the gap",
			[][]string{{"a", ""}, {"bb", "x"}},
			"a   \nbb  x\n",
		},
		{
			"widths in runes",
			[][]string{{"é", "1", "x"}, {"ab", "22", "y"}},
			"é   1   x\nab  22  y\n",
		},
		{
			"ragged rows",
			[][]string{{"a", "b", "c"}, {"long", "d"}},
			"a     b  c\nlong  d\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Write(&b, tc.rows); err != nil {
				t.Fatalf("Write: got %v; want nil", err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("Write:\ngot  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestWriteAsTabwriter pins that a table of equal rows reads as
// text/tabwriter (padding 2, spaces) wrote it, which `walrelay dlq list`
// used before.
func TestWriteAsTabwriter(t *testing.T) {
	rows := [][]string{
		{"POSITION", "MESSAGE_ID", "AGGREGATE", "REASON"},
		{"0/16B3748#2", "-", "order/ünïcode", ""},
		{"0/1#0", "0000-1111", "-/-", "too large"},
	}
	var want bytes.Buffer
	tw := tabwriter.NewWriter(&want, 0, 0, 2, ' ', 0)
	for _, row := range rows {
		for i, cell := range row {
			if i > 0 {
				tw.Write([]byte("\t")) //nolint:errcheck // a bytes.Buffer
			}
			tw.Write([]byte(cell)) //nolint:errcheck // a bytes.Buffer
		}
		tw.Write([]byte("\n")) //nolint:errcheck // a bytes.Buffer
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := Write(&got, rows); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("Write:\ngot  %q\nwant %q", got.String(), want.String())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteReportsTheWriteError(t *testing.T) {
	if err := Write(failingWriter{}, [][]string{{"a", "b"}}); err == nil {
		t.Error("Write to a failing writer: got nil; want the error")
	}
}
