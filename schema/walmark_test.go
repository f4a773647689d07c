package schema

import (
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestWALMarkRoundTrip(t *testing.T) {
	for _, w := range []WALMark{
		{Timeline: 1, Pos: Position{CommitLSN: 0x16B3748, Seq: 0}, Partitions: 3},
		{Timeline: 7, Pos: Position{CommitLSN: pglogrepl.LSN(0xAB_0000_0001), Seq: 4294967295}, Partitions: 1},
		{Timeline: 2147483647, Pos: Position{CommitLSN: pglogrepl.LSN(^uint64(0)), Seq: 12}, Partitions: 10000},
	} {
		v := w.String()
		got, err := ParseWALMark(v)
		if err != nil {
			t.Fatalf("ParseWALMark(%q): %v", v, err)
		}
		if got != w {
			t.Errorf("ParseWALMark(%q) = %+v, want %+v", v, got, w)
		}
		if lsn := strings.Fields(v)[1]; lsn != "lsn="+w.Pos.CommitLSN.String() {
			t.Errorf("%q: lsn field %q is not PostgreSQL's form %s", v, lsn, w.Pos.CommitLSN)
		}
	}
	if got := (WALMark{Timeline: 1, Pos: Position{CommitLSN: 0x16B3748, Seq: 2}, Partitions: 3}).String(); got != "tli=1 lsn=0/16B3748 seq=2 partitions=3" {
		t.Errorf("String = %q", got)
	}
}

func TestParseWALMarkIgnoresUnknownFields(t *testing.T) {
	got, err := ParseWALMark("tli=2 lsn=1/0 seq=5 partitions=6 epoch=9")
	if err != nil {
		t.Fatal(err)
	}
	if want := (WALMark{Timeline: 2, Pos: Position{CommitLSN: 1 << 32, Seq: 5}, Partitions: 6}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseWALMarkRefuses(t *testing.T) {
	for _, v := range []string{
		"",
		"tli=1 lsn=0/1 seq=0",                    // no partitions
		"lsn=0/1 seq=0 partitions=3",             // no tli
		"tli=0 lsn=0/1 seq=0 partitions=3",       // timelines start at 1
		"tli=1 lsn=01 seq=0 partitions=3",        // not an LSN
		"tli=1 lsn=0/1 seq=-1 partitions=3",      // negative
		"tli=1 lsn=0/1 seq=0 partitions=0",       // no partition
		"tli=1 lsn=0/1 seq=0 partitions=3 tli=2", // twice
		"tli=1 lsn=0/1 seq 0 partitions=3",       // not key=value
		"tli=1 lsn=0/1 seq=4294967296 partitions=3",
	} {
		if w, err := ParseWALMark(v); err == nil {
			t.Errorf("ParseWALMark(%q) = %+v, want an error", v, w)
		}
	}
}

func TestWALSource(t *testing.T) {
	if got := WALSource("7433256101470117656", "shop/eu", "walrelay"); got != "7433256101470117656/shop/eu/walrelay" {
		t.Errorf("WALSource = %q", got)
	}
}
